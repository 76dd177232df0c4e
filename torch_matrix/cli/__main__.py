"""`python -m torch_matrix.cli`: the same as the `torch-matrix` console script."""

import sys

from torch_matrix.cli import main

sys.exit(main())
