"""Wiring: spec -> indexes + interpreters -> cells (`pipeline`), one cell's phase order with its seams
(`cellrun`), probing an existing environment (`check`). May import every package above.
"""
