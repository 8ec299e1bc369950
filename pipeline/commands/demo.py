"""`demo DIR`: a complete demo checkout to try every command on, without PyTorch or a Mac.

The bundled sandbox tree, git-initialised, with its build directory (``build/build.ninja``)
and its static OpInfo table named in its ``.mps-pipeline.yaml``: standing in it, every
command of the README works as it would in a PyTorch checkout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.config import Settings
from pipeline.sandbox.demo import DEMO_OP, make_demo

# it makes a tree; there is none to prepare yet
PREPARES_TREE = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="a new (or empty) folder for the demo checkout")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Make the checkout; say what is in it (stderr) and what to run next (stdout)."""
    demo = make_demo(args.dir)
    print(f"demo checkout: {demo.root}", file=sys.stderr)
    print(f"  git work tree, everything committed ({demo.root / '.git'})", file=sys.stderr)
    print(f"  build dir: {demo.build_ninja.relative_to(demo.root)}", file=sys.stderr)
    print(
        f"  OpInfo table: {demo.opinfo_table.relative_to(demo.root)} (set in {demo.config.name})",
        file=sys.stderr,
    )
    print(f"next: cd {demo.root} && mps-pipeline migrate {DEMO_OP}")
    return 0
