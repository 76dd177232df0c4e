#!/usr/bin/env bash
# What the tests need from the system, beside Python: a headless Chromium for the HTML report's
# browser test (tests/test_report_browser.py), jq, which the nightly workflow's issue step runs
# (tests/test_faults.py plays that step), and bubblewrap (bwrap), the sandbox every ecosystem
# run's projects run in (tests/test_ecosystem_sandbox.py). Idempotent and quick when all are there: Debian's
# chromium, Ubuntu's chromium-browser or the google-chrome that GitHub's runners carry (or
# $TORCH_MATRIX_BROWSER). Otherwise installs Debian's packages with apt-get.
set -euo pipefail
packages=()
browser=""
for name in "${TORCH_MATRIX_BROWSER:-}" chromium chromium-browser google-chrome google-chrome-stable; do
  if [ -n "$name" ] && command -v "$name" >/dev/null 2>&1; then
    browser="$name"
    break
  fi
done
[ -n "$browser" ] || packages+=(chromium)
command -v jq >/dev/null 2>&1 || packages+=(jq)
command -v bwrap >/dev/null 2>&1 || packages+=(bubblewrap)
[ "${#packages[@]}" -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-browser: installing Debian's ${packages[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${packages[@]}" >/dev/null
[ -n "$browser" ] || command -v chromium >/dev/null
command -v jq >/dev/null
command -v bwrap >/dev/null
