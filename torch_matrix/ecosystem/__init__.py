"""The ecosystem mode (`torch-matrix ecosystem run / report / diff`), one package, shaped like
Rust's crater: a torch release against many downstream projects' own tests.

- `projects`: the input, the projects file and the two sides (baseline, candidate torch);
- `discover`: what an unpacked sdist implies about running its tests (a zero-config entry; pure),
  from what its configuration says (`testconfig`: pytest's, a tox/nox test session's) and what its
  tests need (`testneeds`: extras, groups, requirement files, plugins, imports);
- `plan`: which projects a shard runs, and what the run will cost;
- `source`: a project's source on disk (sdist, git, path);
- `sides`: one project on one side (venv, install, its own tests, isolated);
- `records`: what a side run wrote (`SideRun`), the classes a project ends in;
- `runner`: the run itself, every project on both sides, the retry;
- `bisection`: a regressed project's first bad torch between the sides, and its pin;
- `fixproofs`: a regression's `torch.load` fixes rerun on the candidate with each applied;
- `results`: a run's result files read back (one directory or its shards, merged);
- `classify`: a project's class from its two sides and the retry (pure);
- `report`: the JSON, Markdown, HTML (`templates/`) and the diff of two runs (pure).

May import every layer (the shared pieces it uses stay there: `edges.proc` for processes,
`world.index` for the index, `world.environment` for uv, `world.wheelset` for the cached torch
wheels, `plan.bisection` for the next release to try).
Only the commands (`cli/`) and the shipped noxfile may import it (tests/test_architecture.py).
"""
