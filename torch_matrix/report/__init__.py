"""Rendering: judged results -> terminal tables (`terminal`), summary.md (`markdown`), the HTML page
(`html_page` + `templates/`), JUnit (`junit`), issue bundles (`repro`), run-to-run diffs (`diff`,
`diff_render`). Pure; may import `vocab`, `judge`, `spec`, `plan`, `pins`.

`rows`: ``Judged``/``judge`` and the rows every renderer shows (cells, details, pivot, grid, missing,
hardware).
"""
