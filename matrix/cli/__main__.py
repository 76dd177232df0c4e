"""`python -m matrix.cli`: the same as the `torch-matrix` console script."""

import sys

from matrix.cli import main

sys.exit(main())
