"""`python -m nm_zones` is `nm-zones`: the systemd unit and the hook use the interpreter path."""

import sys

from .doors.cli import main

sys.exit(main())
