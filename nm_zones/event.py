"""Kept so a hook installed by an older nm-zones (`from nm_zones.event import main`) still runs."""

from .doors.event import main

__all__ = ["main"]
