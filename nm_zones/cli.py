"""Kept so callers of `nm_zones.cli:main` (older launchers, scripts) still work."""

from .doors.cli import main

__all__ = ["main"]
