"""Judgement: why a probe failed (`causes`; read against the whole run:
`runcontext`) and what a cell's results mean (`verdict`), a build on a GPU
(`hardware`), a build's facts from its wheel's files (`wheelbuild`). Pure; may import `vocab`."""
