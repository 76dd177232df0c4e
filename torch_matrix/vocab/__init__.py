"""Vocabulary: the records every layer speaks (Cell, CellResult, ProbeResult, the status StrEnums and the
JSON round trip), `UserError` with its hint, and the run layout (paths, variable and session names).
Pure; may import the standard library only. The published result schema lives in `schema/`.
"""
