"""A process's peak resident memory: alone in a module that imports only the standard
library, because every benchmark child imports it to report its peak, and whatever it imports
would be counted in both sides' times."""

from __future__ import annotations

import sys


def peak_rss_mb() -> float:
    """This process's peak resident memory, in MB. On Linux from /proc (VmHWM): the
    ``ru_maxrss`` of a child started by a large parent counts the parent's pages as its
    own until exec, so a small child looks as big as the benchmark that started it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak / 1024  # bytes / KiB
