"""Edges to the outside world: the spec file (`specfile`), package indexes (`index`), the probe process
(`probe_process`, `probesuite`), interpreters, uv installs (`environment`; uv's output read: `uvoutput`), result files (`results`; their schema check: `resultschema`; which files under a folder: `resultfiles`), the run's
planned cells (`runplan`) and the index facts it read for its pins (`runfacts`), half-made venvs (`envdirs`), the SQLite history (`history`), downstream requirement files (`apply`), a cell's build facts read from its wheels (`wheelfacts`). May import every package above
(`vocab` .. `report`, `edges`).

Also: `listings` (what a listing page or a file name says), `indexcache` (the index's disk cache), `plancache` (the plan kept between
listings, with what it was planned from),
`wheeltarget` (which wheels install on the cell's platform), `wheelset` (which wheels a cell
installs, their sizes, what uv's cache holds), `interpreters` (find Python X.Y), `pipconfig` (pip's
configuration files, shown, never honoured), `shardvalues` (every value read from a shard, checked),
`history_schema` (the history's tables and migrations).
"""
