"""`python -m throttlelab`: the same as the `throttlelab` command."""

import sys

from throttlelab.cli import main

sys.exit(main())
