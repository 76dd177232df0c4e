import sys

from probes.runner import main

sys.exit(main())
