"""Judgement: why a probe failed (`causes`; read against the whole run:
`runcontext`) and what a cell's results mean (`verdict`), a build on a GPU
(`hardware`), a build's facts from its wheel's files (`wheelbuild`). Pure; may import `vocab`.

Also: `catalogue` (the API changes of torch/torchvision a user's tests meet, each with its code fix
and upstream source), `stored` (the verdict stored in each result, computed once), `snapshot` (a
run reduced to its verdicts, for diffs and the history), `gpus` (a hardware target, its label and
slug), `drivers` (which NVIDIA driver runs a CUDA runtime and first knew a card).
"""
