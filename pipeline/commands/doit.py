"""`doit TASK [var=value ...]`: doit's own interface to the tasks, from any directory.

`mps-pipeline doit migrate_op op=atan2`, `mps-pipeline doit help edit`, `mps-pipeline doit
list`: the same tasks and database as `doit` with this project's dodo.py, without one in
the PyTorch checkout. Everything after `doit` is doit's command line: ``pipeline.__main__``
hands it to :func:`pipeline.tasks.run_doit` unparsed, so this module only documents it.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("doit_args", nargs=argparse.REMAINDER, help="doit's command line")
