"""The doors: thin front ends (the hook, the command line, the D-Bus service) that parse
their input and call the engine."""

import os
import sys


def end_process(status: int) -> None:
    """The end of a hook or command process: its output flushed, then the exit without the
    interpreter's teardown of every module and object (2-3 ms a process; nothing is left to
    do by then: the state is on disk, sockets and locks go with the process)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader gone: nothing more to tell it
            pass
    libnft = sys.modules.get("nm_zones.backends.nftables.libnft")
    if libnft is not None:  # a process that committed to nftables: see outlive_grace_period
        libnft.outlive_grace_period()
    os._exit(status)
