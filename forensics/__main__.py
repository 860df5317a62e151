"""`python -m forensics ...`: the same command line as the `forensics` script."""

import sys

from forensics.cli import main

if __name__ == "__main__":
    sys.exit(main())
