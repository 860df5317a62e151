"""`python -m forensics ...`: the same command line as the `forensics` script."""

import sys

from forensics.cli import main

sys.exit(main())
