"""`python -m robolake.bench.peers ...`: the same as `robolake bench peers ...`."""

import sys

from robolake.bench.peers import main

sys.exit(main())
