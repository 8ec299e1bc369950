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
from pipeline.errors import EXIT_INTERRUPTED, EXIT_OK, PipelineError
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
    "demo": ("demo", "make a demo checkout (the bundled sandbox, built and committed) in DIR"),
    "doit": ("doit", "doit's task interface from anywhere: doit migrate_op op=atan2, doit list"),
}


# Shown under `mps-pipeline --help`: what to type first, what doit's markers mean, the exits.
EPILOG = """\
examples:
  mps-pipeline demo ~/mps-demo          a demo checkout to try everything on (no torch needed)
  cd ~/mps-demo && mps-pipeline migrate atan2
  mps-pipeline audit atan2              the guide's checklist, without editing anything
  mps-pipeline migrate atan2 --dry-run  every diff the migration would make
  mps-pipeline backlog                  what is left to migrate, easiest first
  mps-pipeline --root ~/pytorch config  every setting and where it came from

the chain's progress, one line per stage:
  .  STAGE       the stage ran           -- STAGE   it was up to date: nothing to do
  failed: ...    the stage failed, in one line, with what to do next

exit status: 0 done; 1 work left (failing tests, checklist items, a failed build, the tree
busy); 2 bad input or usage; 3 a bad doit command line; 70 nightly crashed (a bug);
130 interrupted (nothing is left half-written)
"""


def _global_options(parser: argparse.ArgumentParser, default: object) -> None:
    """The options every command takes: before the command (``default`` None) or after it
    (``argparse.SUPPRESS``: given there, they win; not given, they leave the first alone)."""
    parser.add_argument(
        "--root",
        default=default,
        help="PyTorch checkout (default: the one you stand in, else the sandbox)",
    )
    parser.add_argument(
        "--python", default=default, help="interpreter that can `import torch` (OpInfo metadata)"
    )
    parser.add_argument(
        "--state-dir", default=default, help="where results, caches and doit's database live"
    )
    parser.add_argument(
        "--build-dir", default=default, help="build directory, relative to root (default: build)"
    )
    parser.add_argument(
        "--opinfo-table", default=default, help="static OpInfo table instead of importing torch"
    )
    parser.add_argument(
        "--config",
        default=default,
        help="config file (default: .mps-pipeline.yaml at the checkout's root)",
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mps-pipeline")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The CLI parser; only ``command``'s module is imported (start-up stays fast)."""
    parser = argparse.ArgumentParser(
        prog="mps-pipeline",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mps-pipeline {_version()}")
    _global_options(parser, None)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name != command:
            continue
        mod = importlib.import_module(f"pipeline.commands.{module}")
        _global_options(p, argparse.SUPPRESS)
        mod.add_arguments(p)
        p.set_defaults(module=mod)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command named in ``argv``: the first word that is not a global option or its value
    (``--root demo audit atan2`` is ``audit``, not ``demo``)."""
    pre = argparse.ArgumentParser(add_help=False)
    _global_options(pre, None)
    _, rest = pre.parse_known_args(argv)
    first = next((a for a in rest if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["doit"]:  # the rest is doit's own command line, its variables included
        from pipeline import tasks

        return _guarded(lambda: tasks.run_doit(argv[1:]))
    args = build_parser(_command(argv)).parse_args(argv)
    if not hasattr(args, "module"):  # the command hid behind an abbreviated option (--ro X)
        args = build_parser(args.command).parse_args(argv)
    if args.command == "doit":  # global options before `doit` become doit's variables
        from pipeline import tasks

        given = [f"{k}={v}" for k in (*OVERRIDABLE, "config") if (v := getattr(args, k, None))]
        return _guarded(lambda: tasks.run_doit([*args.doit_args, *given]))
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


if __name__ == "__main__":
    sys.exit(main())
