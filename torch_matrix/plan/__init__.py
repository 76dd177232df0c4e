"""Planning: spec + index facts + interpreters -> cells (`grid`), cells -> CI shards (`shards`), the cell that
isolates a failure's blame (`counterfactual`), the next version to try (`bisection`), the cells planned from results (`followups`; a break's edges: `breaks`; the cell
that tests an edge release: `edgecells`), the cells × targets verdicts before installing (`hardware`). Pure; may import
`vocab`, `judge`, `spec`.

Also: `cost` (what a run costs: downloads, its peak disk, whether a cell fits), `stale` (which
results still belong to the run's plan), `unbisected` (a break no edge is searched for, and why).
"""
