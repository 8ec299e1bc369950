"""`mps-pipeline COMMAND ...` (or `python -m pipeline`): the scriptable face of every doit task.

Every command first says, on stderr, which tree it works on and why that one.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's own costs a warm audit's replay 3 ms (mypy reads it alike)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

# Imported by main() only past the warm audit's replay (pipeline.flows.audit_replay.cli_saved),
# which needs none of them: argparse, the settings (yaml), the option table.

# command -> (module in pipeline.commands implementing add_arguments() and run(), help)
COMMANDS: dict[str, tuple[str, str]] = {
    "audit": ("audit", "the metal-kernel guide's checklist for one operator"),
    "backlog": ("backlog", "operators still on MPSGraph or without MPS, easiest first"),
    "paths": ("paths", "which path MPS takes per overload: Metal, MPSGraph, composite, none"),
    "migrate": ("migrate", "edit, build, test, table and drop xfails for one operator"),
    "check-math": ("check_math", "compile a functor on the host and compare it with torch"),
    "check-kernel": ("check_kernel", "run a .metal file's whole kernels on the host, vs torch"),
    "affected": ("affected", "operators and tests a diff affects"),
    "pr-report": ("pr_report", "run a PR's affected tests and post one status comment"),
    "nightly": ("nightly", "merge every runner's JUnit, keep history, propose xfail removals"),
    "shards": ("shards", "the nightly sweep's shards, balanced by each test's duration"),
    "review": ("review", "the checks reviewers make by eye, on a diff: file:line, one reason"),
    "speed": ("speed", "time migrated and backlog kernels; compare with main's on this runner"),
    "tracker": ("tracker", "keep the migration tracker issue's section: backlog, claims"),
    "export": ("export", "test results as JSON Lines rows PyTorch's HUD (ClickHouse) loads"),
    "history": ("history", "the nightly history: copy one into a server, row by row checked"),
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

the options --root, --python, --state-dir, --build-dir, --opinfo-table and --config go
before or after the command: mps-pipeline --root ~/pytorch audit atan2

exit status: 0 done; 1 work left (failing tests, checklist items, a failed build, the tree
busy); 2 bad input or usage; 3 a bad doit command line; 70 crashed (a bug; the traceback
is printed above); 130 interrupted (nothing is left half-written)
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mps-pipeline")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _version_action() -> type[argparse.Action]:
    """``--version``, looked up only when asked: importlib.metadata costs every command
    40 ms of start-up (a tenth of a warm ``paths``)."""
    import argparse

    class Version(argparse.Action):
        def __init__(self, option_strings: Sequence[str], dest: str, **kwargs) -> None:
            kwargs.update(nargs=0, default=argparse.SUPPRESS, help="show the version and exit")
            super().__init__(option_strings, dest, **kwargs)

        def __call__(self, parser, namespace, values, option_string=None) -> None:
            print(f"mps-pipeline {_version()}")  # on stdout, as argparse's own version action
            parser.exit()

    return Version


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The CLI parser; only ``command``'s module is imported (start-up stays fast)."""
    import argparse
    import importlib

    from pipeline.options import OPTIONS, SETTINGS_OPTIONS

    parser = argparse.ArgumentParser(
        prog="mps-pipeline",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # `speed --op` must never mean `--opinfo-table`
    )
    parser.add_argument("--version", action=_version_action())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        if name != command:
            continue
        mod = importlib.import_module(f"pipeline.commands.{module}")
        for option in SETTINGS_OPTIONS:
            OPTIONS[option].add_to(p)
        mod.add_arguments(p)
        p.set_defaults(module=mod)
    return parser


def global_flags() -> tuple[str, ...]:
    """The options every command takes (its settings), as flags: --root, --state-dir, ..."""
    from pipeline.options import OPTIONS, SETTINGS_OPTIONS

    return tuple(OPTIONS[key].flag for key in SETTINGS_OPTIONS)


def _global_flag(arg: str) -> str | None:
    """The global flag ``arg`` names (``--root``, ``--root=X``, or a prefix argparse accepts:
    ``--ro``), else None."""
    name = arg.partition("=")[0]
    if not name.startswith("--"):
        return None
    flags = global_flags()
    found = [flag for flag in flags if flag.startswith(name)]
    return found[0] if len(found) == 1 or name in found else None


def _hoist(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` with the global options given before the command moved to just after it (so
    the command's parser reads them; a later one still wins), and those options."""
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if _global_flag(arg) is not None:
            take = 1 if "=" in arg else 2
            moved += argv[i : i + take]
            i += take
            continue
        if arg.startswith("-"):
            rest.append(arg)
            i += 1
            continue
        # the command (or the word argparse will say is no command)
        return [*rest, arg, *moved, *argv[i + 1 :]], moved
    return argv, []


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    typed = list(argv)
    if "audit" in argv:
        # a warm audit: what the last one wrote, while nothing it rests on changed
        from pipeline.flows import audit_replay

        saved = audit_replay.cli_saved(typed)
        if saved is not None:
            return _guarded(lambda: audit_replay.write_saved(saved))
    import argparse

    argv, moved = _hoist(argv)
    command = next((a for a in argv if a in COMMANDS), None)
    if command == "doit" and argv[0] == "doit":
        from pipeline import tasks

        # the rest is doit's own command line, its variables included; global options that
        # came before `doit` are its variables (root=...)
        pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        for flag in global_flags():
            pre.add_argument(flag)
        given = vars(pre.parse_args(moved))
        doit_vars = [f"{key}={value}" for key, value in given.items() if value]
        rest = argv[1 + len(moved) :]
        return _guarded(lambda: tasks.run_doit([*rest, *doit_vars]))
    args = build_parser(command).parse_args(argv)
    args.argv = typed  # what the audit's replay is keyed on
    return _guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pipeline.config import load_settings
    from pipeline.options import OVERRIDABLE
    from pipeline.workspace import announce, prepare

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
    except (Exception, KeyboardInterrupt) as exc:
        return _failed(exc)


def _failed(exc: BaseException) -> int:
    """The exit status of a command that raised ``exc``, said in one line
    (:func:`pipeline.errors.failure`, which the doit tasks share). Imported only when
    something failed, which a replayed audit never pays for."""
    from pipeline.errors import EXIT_INTERRUPTED, EXIT_OK, failure

    failed = failure(exc)
    if failed.code == EXIT_OK:
        # a closed stdout (`--json | head`): keep Python's shutdown flush from raising again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    elif failed.code == EXIT_INTERRUPTED:
        print(f"\n{failed.line}", file=sys.stderr)
    else:
        print(f"error: {failed.line}", file=sys.stderr)
    return failed.code


if __name__ == "__main__":
    sys.exit(main())
