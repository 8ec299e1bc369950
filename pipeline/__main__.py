"""`python -m pipeline COMMAND ...` — the scriptable face of every doit task."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pipeline.config import load_settings
from pipeline.errors import PipelineError

# command name -> module in pipeline.commands implementing add_arguments() and run()
COMMANDS: dict[str, str] = {
    "audit": "audit",
    "backlog": "backlog",
    "migrate": "migrate",
    "affected": "affected",
    "pr-report": "pr_report",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        mod = importlib.import_module(f"pipeline.commands.{module}")
        p = sub.add_parser(name, help=(mod.__doc__ or "").strip().splitlines()[0])
        p.add_argument("--root", help="PyTorch checkout (default: the bundled sandbox)")
        p.add_argument("--python", help="interpreter that can `import torch` (OpInfo metadata)")
        p.add_argument("--state-dir", help="where results, caches and doit's database live")
        mod.add_arguments(p)
        p.set_defaults(module=mod)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(
            {"root": args.root, "python": args.python, "state_dir": args.state_dir}
        )
        return args.module.run(args, settings)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
