"""Edges with one I/O job each: every child process (`proc`), every warning/error/progress line (`console`),
the one atomic writer (`fileio`), one run per directory (`locks`), schema -> plain-Python check
(`fastcheck`). May import the standard library and `vocab` only.
"""
