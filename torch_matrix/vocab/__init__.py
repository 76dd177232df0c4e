"""Vocabulary: the records every layer speaks (Cell, CellResult, ProbeResult, the status StrEnums
and the JSON round trip), `UserError` with its hint, the run layout (paths, session names), and
`settings`: every `TORCH_MATRIX_*` environment variable, declared once, with its one parser.
Pure; may import the standard library, `packaging` (`versions`: the one version ordering) and
the probe side's terminal rule (`probes.visible`, which `escaping` applies). The published result schema lives in `schema/`.

Its modules: `records` (Cell/ProbeResult/CellResult, the JSON round trip), `errors` (``UserError``),
`layout` (run dir, cell files, variables, session names), `escaping` (one rule per sink: terminal,
GitHub Markdown, shell), `versions`, `settings`, `sizes` (byte sizes read and written).
"""
