"""The shipped noxfile with the old rerun rule (benchmarks/old_rerun_rule.py): figure 8(b) only."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

from benchmarks import old_rerun_rule  # noqa: E402

old_rerun_rule.install()

from torch_matrix.noxfile import matrix, report  # noqa: E402,F401 - registers the shipped sessions
