"""`python -m implicitbias ...`: the same command line as `implicitbias ...`."""

import sys

from implicitbias.cli import main

sys.exit(main())
