"""`python -m nm_zones` is `nm-zones`: the systemd unit and the hook use the interpreter path."""

from .doors.cli import run

run()
