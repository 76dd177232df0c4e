"""A pytest plugin for the ecosystem run's retry (``-p pytest_select`` in the project's own pytest):
keep only the tests whose node ids the file ``$TORCH_MATRIX_PYTEST_ONLY`` lists, one a line, so
the project's own command (``python -m pytest tests``) reruns just its regressed tests. Stdlib
only, any pytest from 3.x on; without the variable it does nothing.
"""

import os

ONLY_ENV = "TORCH_MATRIX_PYTEST_ONLY"


def _wanted():
    path = os.environ.get(ONLY_ENV)
    if not path:
        return None
    try:
        with open(path) as handle:
            return {line.strip() for line in handle if line.strip()}
    except OSError:
        return None


def pytest_collection_modifyitems(session, config, items):
    wanted = _wanted()
    if wanted is None:
        return
    kept = [item for item in items if item.nodeid in wanted]
    dropped = [item for item in items if item.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
