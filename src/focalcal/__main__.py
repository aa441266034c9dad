import sys

from focalcal.commands.cli import main

sys.exit(main())
