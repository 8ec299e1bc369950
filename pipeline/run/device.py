"""Read the device this runner tests on, on the Mac: system_profiler, sysctl and torch.

:class:`pipeline.results.device.Device` parses what these commands print; a command that
cannot run (not a Mac, no torch) leaves its fields "unknown".
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from pipeline.results.device import SYSCTL_KEYS, Device

SYSTEM_PROFILER = ("system_profiler", "-json", "SPDisplaysDataType")
TORCH_NAME = "import torch; print(torch.backends.mps.get_name())"
_TIMEOUT = 60.0


def _output(command: Sequence[str]) -> str | None:
    """What ``command`` printed; None when it could not run. sysctl exits non-zero when
    one of its names is unknown but still prints the others, so the output is kept."""
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.stdout.strip() else None


def probe(python: str | None) -> Device:
    """This machine's device; ``python`` is the interpreter with the build's torch."""
    torch_name = _output([python, "-c", TORCH_NAME]) if python else None
    return Device.from_outputs(
        _output(SYSTEM_PROFILER), _output(["sysctl", *SYSCTL_KEYS]), torch_name
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipeline.run.device DIR``: write DIR/device.json (the nightly's step
    beside the sweep: the interpreter running it is the one with the build's torch)."""
    import argparse
    import sys

    from pipeline.results import device

    parser = argparse.ArgumentParser(prog="python -m pipeline.run.device")
    parser.add_argument("folder", type=Path, help="the runner's results folder")
    args = parser.parse_args(argv)
    found = probe(sys.executable)
    path = device.write(args.folder, found)
    print(f"device: {found.label()}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
