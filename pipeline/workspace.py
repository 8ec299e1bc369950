"""Make the tree the settings name ready to work on: the step between loading and working.

:func:`pipeline.config.load_settings` only reads configuration; this is where the bundled
sandbox's working copy is created and a checkout's state folder is kept out of git, so every
command and doit task goes through here once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.tree import paths


def prepare(settings: Settings) -> Settings:
    """Create the sandbox's working copy when the settings select it; return the settings.

    Raises ConfigError when ``root`` is not a PyTorch tree: every reader would otherwise
    find nothing and report an operator as done.
    """
    state = settings.state_dir
    for folder in (state, *state.parents):
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():  # mkdir would stop the run later with a traceback
                raise ConfigError(
                    f"{folder} is not a directory, but the state directory {state} must be "
                    "one: move it away or pass --state-dir / state_dir="
                )
            break
    if settings.is_sandbox:
        from pipeline import sandbox  # only the sandbox needs it

        sandbox.materialize(settings.root)
        if not (settings.root / paths.NATIVE_YAML).exists():
            raise ConfigError(
                f"the sandbox's working copy {settings.root} has no {paths.NATIVE_YAML}; "
                "delete that folder and the next run makes a fresh copy"
            )
    # exists(), not is_file(): a native_functions.yaml that is a folder or unreadable is the
    # reader's one-line error, naming what is wrong with it
    elif not (settings.root / paths.NATIVE_YAML).exists():
        origin = settings.sources["root"].origin if settings.sources else "root="
        raise ConfigError(
            f"{settings.root} is not a PyTorch checkout: no {paths.NATIVE_YAML} "
            f"(set by {origin}); point root= at one, or leave it unset for the bundled sandbox"
        )
    elif not settings.state_dir.exists():
        exclude_from_git(settings.root, settings.state_dir)
    return settings


def exclude_from_git(root: Path, folder: Path) -> None:
    """Add ``folder`` (inside ``root``) to the checkout's ``.git/info/exclude``, once.

    The state folder holds results and doit's database: they belong to this tree but never to
    a commit, and ``git status`` must not list them (the edit guard reads it).
    """
    if not folder.resolve().is_relative_to(root.resolve()):
        return  # a state dir elsewhere: nothing of ours in the checkout
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel", "--git-path", "info/exclude"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return  # no git: no checkout to keep clean
    if proc.returncode != 0 or len(proc.stdout.splitlines()) != 2:
        return  # not a git work tree
    top, exclude_path = proc.stdout.splitlines()
    exclude = root / exclude_path  # relative to root, or absolute
    # patterns in info/exclude are relative to the work tree's top
    line = f"/{folder.resolve().relative_to(Path(top).resolve()).as_posix()}/"
    text = exclude.read_text(encoding="utf-8", errors="replace") if exclude.is_file() else ""
    if line in text.splitlines():
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a", encoding="utf-8") as fh:
        fh.write(("\n" if text and not text.endswith("\n") else "") + f"{line}\n")


def announcement(settings: Settings) -> str:
    """What :func:`announce` writes."""
    lines = (settings.root_line(), *(f"warning: {w}" for w in settings.warnings))
    return "".join(f"{line}\n" for line in lines)


def announce(settings: Settings) -> None:
    """Say on stderr which tree this run works on (and why), then any settings warnings:
    the first line of every command's output, out of the way of ``--json`` on stdout."""
    sys.stderr.write(announcement(settings))
