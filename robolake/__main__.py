import sys

from robolake.cli import main

sys.exit(main())
