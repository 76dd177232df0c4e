"""Edges with one I/O job each: every child process (`proc`), every warning/error/progress line (`console`),
the one atomic writer (`fileio`), one run per directory (`locks`), schema -> plain-Python check
(`fastcheck`), one bounded HTTP GET (`httpget`: a cap, a deadline, a retry on a cut body), a wheel's
members by HTTP range requests (`ranges`, over the pure zip directory parser `zipdir`), confinement for
code nobody here chose (`sandbox`, with bubblewrap) and its index-only network (`indexgate`).
May import the standard library and `vocab` only.
"""
