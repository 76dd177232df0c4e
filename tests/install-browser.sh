#!/usr/bin/env bash
# A headless Chromium for the HTML report's browser test (tests/test_report_browser.py).
# Idempotent and quick when one is there: Debian's chromium, Ubuntu's chromium-browser or the
# google-chrome that GitHub's runners carry (or $TORCH_MATRIX_BROWSER). Otherwise installs Debian's.
set -euo pipefail
for name in "${TORCH_MATRIX_BROWSER:-}" chromium chromium-browser google-chrome google-chrome-stable; do
  if [ -n "$name" ] && command -v "$name" >/dev/null 2>&1; then
    exit 0
  fi
done
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-browser: no Chromium found; installing Debian's chromium with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null
