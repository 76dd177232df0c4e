import sys

from torch_matrix.probes.runner import main

sys.exit(main())
