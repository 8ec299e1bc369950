"""`mps-pipeline COMMAND ...` (or `python -m pipeline`): the scriptable face of every doit task.

Every command first says, on stderr, which tree it works on and why that one.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline.config import OVERRIDABLE, load_settings
from pipeline.errors import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, PipelineError
from pipeline.workspace import announce, prepare

# command -> (module in pipeline.commands implementing add_arguments() and run(), help)
COMMANDS: dict[str, tuple[str, str]] = {
    "audit": ("audit", "the metal-kernel guide's checklist for one operator"),
    "backlog": ("backlog", "operators still on MPSGraph or without MPS, easiest first"),
    "migrate": ("migrate", "edit, build, test, table and drop xfails for one operator"),
    "affected": ("affected", "operators and tests a diff affects"),
    "pr-report": ("pr_report", "run a PR's affected tests and post one status comment"),
    "nightly": ("nightly", "merge every runner's JUnit, keep history, propose xfail removals"),
    "shards": ("shards", "the nightly sweep's shards, balanced by each test's duration"),
    "config": ("config", "every setting, its value and where it came from"),
    "doit": ("doit", "doit's task interface from anywhere: doit migrate_op op=atan2, doit list"),
}


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The CLI parser; only ``command``'s module is imported (start-up stays fast)."""
    parser = argparse.ArgumentParser(prog="mps-pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name != command:
            continue
        mod = importlib.import_module(f"pipeline.commands.{module}")
        p.add_argument(
            "--root", help="PyTorch checkout (default: the one you stand in, else the sandbox)"
        )
        p.add_argument("--python", help="interpreter that can `import torch` (OpInfo metadata)")
        p.add_argument("--state-dir", help="where results, caches and doit's database live")
        p.add_argument("--build-dir", help="build directory, relative to root (default: build)")
        p.add_argument("--opinfo-table", help="static OpInfo table instead of importing torch")
        p.add_argument(
            "--config", help="config file (default: .mps-pipeline.yaml at the checkout's root)"
        )
        mod.add_arguments(p)
        p.set_defaults(module=mod)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["doit"]:  # the rest is doit's own command line, its variables included
        from pipeline import tasks

        return _guarded(lambda: tasks.run_doit(argv[1:]))
    command = next((a for a in argv if a in COMMANDS), None)
    args = build_parser(command).parse_args(argv)
    return _guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    settings = load_settings(
        {key: getattr(args, key) for key in OVERRIDABLE},
        config_path=Path(args.config) if args.config else None,
    )
    if not getattr(args.module, "PREPARES_TREE", True):
        return args.module.run(args, settings)
    settings = prepare(settings)
    announce(settings)
    return args.module.run(args, settings)


def _guarded(run: Callable[[], int]) -> int:
    """Run a command: its errors become one line and an exit status, never a traceback."""
    try:
        return run()
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `... --json | head` closed our stdout: not an error of ours; keep Python's shutdown
        # flush from raising again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        # Source edits are transactions (rolled back, or forward by the next run).
        print("\ninterrupted: nothing half-written was left behind", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:  # a read-only, full or failing disk: the path and why, exit 2
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        print(f"error: {where}: {exc.strerror or exc}" if where else f"error: {exc}",
              file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
