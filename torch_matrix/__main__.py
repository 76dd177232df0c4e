"""`python -m torch_matrix`: the same as the `torch-matrix` console script."""

import sys

from torch_matrix.cli import main

sys.exit(main())
