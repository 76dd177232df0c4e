"""Wiring: spec -> indexes + interpreters -> cells (`pipeline`), one cell's phase order with its seams
(`cellrun`), probing an existing environment (`check`), the wheels' hardware facts read at plan time (`targetplan`). May import every package above.

Also: `sessions` (the bodies of the shipped noxfile's sessions), `matrixplan` (the matrix a nox
process offers: resume, ``--redo``, the run lock), `selection` (which sessions a nox command line
runs, in nox's order), `prefetch` (the next cells' wheels fetched while a cell runs its probes),
`disk` (the disk budget, the keeper that evicts, each session's side), `sizing` (what a cell's
install weighs), `followups` (the follow-up cells, a venv each), `pins` (the one pins pipeline),
`report` (the report command's use case), `bisection` (the bisect command's use case), `diff`
(two runs compared, and the issue plan: the diff command's use case).
"""
