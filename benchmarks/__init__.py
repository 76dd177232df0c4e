"""Benchmarks for torch-matrix: ``python -m benchmarks.run [--quick] [--out FILE]`` (or ``nox -s bench``).

One module per measured figure (``warm_env``, ``cold_matrix``, ``disk``, ``probe_figure``,
``scale``, ``parallel``); ``stats`` holds the pure parts (medians, ratios, target checks)
and ``common`` the subprocess / filesystem helpers they share.
"""
