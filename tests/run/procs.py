"""Process checks shared by the runner tests."""

from __future__ import annotations

import os
import time
from pathlib import Path


def gone(pid: int, wait: float = 5.0) -> bool:
    """True once ``pid`` has exited (a zombie nobody reaps counts as exited: in a container
    without an init, orphans are never reaped)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        stat = Path(f"/proc/{pid}/stat")
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False
