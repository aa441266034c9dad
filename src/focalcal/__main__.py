import sys

from focalcal.cli import main

sys.exit(main())
