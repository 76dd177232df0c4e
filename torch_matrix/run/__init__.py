"""Wiring: spec -> indexes + interpreters -> cells (`pipeline`), one cell's phase order with its seams
(`cellrun`), probing an existing environment (`check`), the wheels' hardware facts read at plan time (`targetplan`). May import every package above.
"""
