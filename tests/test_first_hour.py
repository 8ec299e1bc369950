"""Issue 19, the first hour of a new user: each point, run as a new user runs it.

The tool is installed non-editable (its wheel, ``pip install --no-deps``) into a fresh venv
whose dependencies come from this interpreter's site-packages through a ``.pth`` line (the
test needs no registry; a ``.pth`` path line adds a folder but runs none of its own ``.pth``
files, so the editable install of a development checkout there stays out). Commands run
in a user's environment (no PYTHONPATH, no MPS_PIPELINE_* variable, HOME a scratch folder)
from a directory inside a demo checkout that ``mps-pipeline demo`` made.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from docsgen.__main__ import BEGIN, END, sample_text
from pipeline.report.render import FLAKY_MEANING, MEANINGS
from tests.conftest import session_shared, site_without_torch, venv_with, wheel_key
from tests.doit_runs import stages_run

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI_README = (REPO / "ci" / "README.md").read_text(encoding="utf-8")
BINARY_KERNEL_MM = "aten/src/ATen/native/mps/operations/BinaryKernel.mm"


@dataclass(frozen=True)
class User:
    """A new user's machine: the fresh venv, a home folder, and how they run the tool."""

    venv: Path
    home: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def sandbox(self) -> Path:
        """The bundled sandbox's working copy, in this user's state folder (no XDG_STATE_HOME:
        ~/.local/state/mps-pipeline)."""
        return self.home / ".local" / "state" / "mps-pipeline" / "sandbox"

    def env(self) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "PYTHONPATH",
                "PYTHONHOME",
                "VIRTUAL_ENV",
                "XDG_STATE_HOME",
                "XDG_CACHE_HOME",
                "GITHUB_TOKEN",
            )
            and not k.startswith(("MPS_PIPELINE_", "PYTEST_", "MPS_SIM_", "COV_"))
        }
        # the venv's bin first, as an activated venv has it; git and a shell from the system
        return {**keep, "HOME": str(self.home), "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin"}

    def run(
        self, *args: str, cwd: Path, columns: int | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``mps-pipeline ARGS`` in ``cwd`` (on a terminal ``columns`` wide)."""
        wide = {"COLUMNS": str(columns)} if columns else {}
        return subprocess.run(
            [str(self.venv / "bin" / "mps-pipeline"), *args],
            cwd=cwd,
            env={**self.env(), **wide},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def demo(self, name: str = "mps-demo") -> Path:
        made = self.run("demo", name, cwd=self.home)
        assert made.returncode == 0, made.stdout + made.stderr
        return self.home / name


PIP = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]


def _new_user(
    tmp_path_factory: pytest.TempPathFactory,
    key: str,
    wheel: Path,
    dependencies: Callable[[Path], Path],
) -> User:
    """A fresh venv with ``wheel`` installed, its dependencies from the folder
    ``dependencies(base)`` makes (or names), and a home folder of this worker's own. The venv
    is made once a session under ``key`` and shared by the xdist workers: no test writes
    into it, and every test writes into the home."""

    def install(base: Path) -> None:
        python = venv_with(base / "venv", dependencies(base))
        subprocess.run([*PIP, "--python", str(python), "install", "--no-deps", str(wheel)],
                       check=True)  # fmt: skip

    venv = session_shared(tmp_path_factory, f"{key}-{wheel_key(wheel)}", install) / "venv"
    home = tmp_path_factory.mktemp(key) / "home"
    home.mkdir()
    return User(venv, home)


@pytest.fixture(scope="session")
def user(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> User:
    """The fresh venv with the tool's wheel installed, shared by every test here."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    return _new_user(tmp_path_factory, "new-user", wheel, lambda _: purelib)


@pytest.fixture(scope="session")
def user_without_torch(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> User:
    """A new user whose venv has what a plain ``pip install mps-pipeline`` brings: no torch."""
    plain = lambda base: site_without_torch(base / "site-packages")  # noqa: E731
    return _new_user(tmp_path_factory, "new-user-without-torch", wheel, plain)


@pytest.fixture(scope="session")
def migrated(
    user: User,
) -> tuple[Path, subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """A demo checkout where ``migrate atan2`` ran twice from ``aten/src``: (root, 1st, 2nd)."""
    root = user.demo("migrated")
    first = user.run("migrate", "atan2", cwd=root / "aten" / "src")
    second = user.run("migrate", "atan2", cwd=root / "aten" / "src")
    return root, first, second


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("error:", "failed:"))]


def test_the_install_is_not_editable(user: User) -> None:
    code = "import pipeline, doit; print(pipeline.__file__)"
    proc = subprocess.run(
        [str(user.python), "-c", code],
        cwd=user.home,  # not this checkout: `-c` puts the current directory on sys.path
        env=user.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    where = Path(proc.stdout.strip())
    assert where.is_relative_to(user.venv) and not where.is_relative_to(REPO)


# ------------------------------------------------------------- 1. no torch: one line


def test_1_an_interpreter_without_torch_is_one_line_and_the_tree_unchanged(
    user: User, tmp_path: Path
) -> None:
    root = user.demo("no-table")
    # a checkout that reads op_db, as a real one does: no static table
    git(root, "rm", "-q", ".mps-pipeline.yaml")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "op_db")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    if subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the base interpreter has torch: no interpreter without it to try")
    for command in (["audit", "atan2"], ["migrate", "atan2"]):
        result = user.run(*command, "--python", str(python), cwd=root / "aten")
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Traceback" not in result.stderr + result.stdout
        assert "NoneType" not in result.stderr + result.stdout
        assert error_lines(result.stderr) == [
            f"error: the checklist of atan2: python={python} has no torch: pip install torch "
            "into it, point python= (--python, MPS_PIPELINE_PYTHON) at an interpreter that has "
            "it, or set opinfo_table to a static table"
            if command[0] == "migrate"
            else f"error: python={python} has no torch: pip install torch into it, point "
            "python= (--python, MPS_PIPELINE_PYTHON) at an interpreter that has it, or set "
            "opinfo_table to a static table"
        ]
        assert git(root, "status", "--porcelain") == ""


# ------------------------------------------------------------- 3. mps-pipeline demo


def test_3_demo_makes_a_checkout_every_readme_command_works_in(user: User) -> None:
    made = user.run("demo", "~/fresh-demo", cwd=user.home)
    assert made.returncode == 0, made.stderr
    root = user.home / "fresh-demo"
    assert made.stdout == f"next: cd {root} && mps-pipeline migrate atan2\n"
    assert git(root, "status", "--porcelain") == ""
    assert len(git(root, "log", "--oneline").splitlines()) == 2
    assert "torch_cpu" in (root / "build" / "build.ninja").read_text()
    inside = root / "aten" / "src" / "ATen"

    config = user.run("config", "--json", cwd=inside)
    settings = json.loads(config.stdout)["settings"]
    assert settings["root"] == {
        "value": str(root),
        "origin": "the PyTorch checkout containing the current directory",
    }
    assert settings["opinfo_table"]["origin"] == str(root / ".mps-pipeline.yaml")

    # the README's commands, each from inside the checkout, with no flag or variable
    for args, codes in (
        (["audit", "atan2"], {1}),  # not migrated yet: checklist items left
        (["backlog", "--json"], {0}),
        (["migrate", "atan2", "--dry-run"], {0}),
        (["affected", "--changed", "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"], {0}),
        (["affected", "--base", "HEAD~1"], {0}),
        (["pr-report", "--pr", "1", "--base", "HEAD~1", "--dry-run"], {0}),
        (["shards", "--num-shards", "2"], {0}),
        (["doit", "list"], {0}),
        (["migrate", "atan2"], {0}),
    ):
        result = user.run(*args, cwd=inside)
        assert result.returncode in codes, (args, result.stdout, result.stderr)
        assert result.stderr.splitlines()[0].startswith(f"root: {root} "), args
    assert "atan2" in user.run("affected", "--changed", BINARY_KERNEL_MM, cwd=inside).stdout

    # a second demo into a folder that holds anything: one line, exit 2, nothing touched
    again = user.run("demo", str(root), cwd=user.home)
    assert again.returncode == 2
    assert again.stderr == (
        f"error: {root} is not empty; name a new (or empty) folder for the demo checkout\n"
    )
    assert len(git(root, "log", "--oneline").splitlines()) == 2


# ------------------------------------------------ 4, 5. a no-op run answers; git diff's path


def test_4_a_no_op_run_gives_the_verdict_with_the_summary_path(migrated, user: User) -> None:
    root, first, second = migrated
    assert first.returncode == 0 and second.returncode == 0, second.stdout + second.stderr
    assert stages_run(second.stdout) == set()
    summary = root / ".mps-pipeline" / "ops" / "atan2" / "summary.md"
    for run in (first, second):
        assert "verdict: atan2: Every checklist item passes." in run.stdout
        assert run.stdout.endswith(f"\nsummary: {summary}\n")
    assert summary.is_file()
    # torch's answers and the functor's object are in the user's cache, which every demo and
    # checkout of theirs shares (no XDG_CACHE_HOME: ~/.cache), not in the checkout's state
    kept = user.home / ".cache" / "mps-pipeline" / "math"
    assert list(kept.glob("reference-*.json")) and list(kept.glob("atan2-*.so"))
    assert not list((root / ".mps-pipeline").rglob("reference-*.json"))


def test_5_next_names_the_tree_whose_git_diff_to_review(migrated, user: User) -> None:
    root, _, second = migrated
    (command,) = re.findall(r"review `(git -C \S+ diff)`", second.stdout)
    assert command == f"git -C {root} diff"
    changed = git(root, "diff", "--name-only").split()
    assert BINARY_KERNEL_MM in changed and len(changed) == 4

    # outside any checkout the edits are in the sandbox's working copy: that is the path
    elsewhere = user.home / "elsewhere"
    elsewhere.mkdir()
    run = user.run("migrate", "atan2", cwd=elsewhere)
    assert run.returncode == 0, run.stdout + run.stderr
    sandbox = user.sandbox  # in the user's state folder (issue 28), not in `elsewhere`
    assert f"review `git -C {sandbox} diff`" in run.stdout
    assert BINARY_KERNEL_MM in git(sandbox, "diff", "--name-only").split()


# ------------------------------------------------------ 6. doit's words, in ours


def test_6_failures_are_one_line_in_our_words(user: User) -> None:
    root = user.demo("failing")
    inside = root / "aten"
    for args in (["migrate", "nosuchop"], ["doit", "migrate_op", "op=nosuchop"]):
        unknown = user.run(*args, cwd=inside)
        assert unknown.returncode == 2
        out = unknown.stdout + unknown.stderr
        assert "taskid" not in out and "TaskError" not in out and "Traceback" not in out
        (line,) = error_lines(unknown.stderr)
        assert line.startswith("error: the checklist of nosuchop: unknown operator 'nosuchop'")

    kernel = root / BINARY_KERNEL_MM
    kernel.write_text(kernel.read_text().replace('"copysign"', '"copysign_typo"'))
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "a typo")
    broken = user.run("migrate", "copysign", cwd=inside)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    out = broken.stdout + broken.stderr
    assert "TaskFailed" not in out and "taskid" not in out and "#####" not in out
    (line,) = error_lines(broken.stderr)
    assert line.startswith("failed: the build: build failed: ")
    assert "copysign_typo" in line and "full log: " in line
    assert line.endswith("fix that error, then run the same command again (only what changed "
                         "is rebuilt)")  # fmt: skip
    assert "test_op" not in stages_run(broken.stdout)

    helped = user.run("--help", cwd=inside)
    assert helped.returncode == 0
    assert ".  STAGE       the stage ran" in helped.stdout
    assert "-- STAGE   it was up to date: nothing to do" in helped.stdout
    assert "`.  STAGE` is a stage that ran; `-- STAGE` one that was up to date" in README


# ------------------------------------------------------------ 7. the pass table


def test_7_the_pass_table_is_explained_and_the_final_one_shown(migrated) -> None:
    root, first, _ = migrated
    assert f"  XPASS: {MEANINGS[next(o for o in MEANINGS if o.value == 'xpass')]}" in first.stdout
    ops = root / ".mps-pipeline" / "ops" / "atan2"
    final, before = (ops / "table.md").read_text(), (ops / "table.before-drops.md").read_text()
    assert final.startswith("## After dropping the xfails\n")
    assert "| atan2 | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |" in final
    assert "table.before-drops.md" in final
    assert before.split("\n")[2].count("**XPASS**") == 6
    for text in (final, before):
        assert "Unexpected success" not in text
        assert "Legend" in text and "flaky" in text
    assert "- atan2 int64: XPASS: passes now: its xfail entry can go" in before
    # the README's legend says what the tool says
    for outcome, meaning in MEANINGS.items():
        assert f"| {meaning} |" in README, outcome
    assert FLAKY_MEANING.removeprefix("flaky: ") in README


# ------------------------------------------------------- 8. small inconsistencies


def test_8_version_global_flags_help_config_backlog_and_nightly_agree(
    user: User, migrated, tmp_path: Path
) -> None:
    root = user.demo("small")
    inside = root / "test"
    version = user.run("--version", cwd=inside)
    assert (version.returncode, version.stdout) == (0, "mps-pipeline 0.1.0\n")

    # a global flag before the command, from outside the checkout; a value that is also a
    # command name ("demo") is the flag's value, not the command
    before = user.run("--root", str(root), "audit", "atan2", "--json", cwd=user.home)
    assert before.returncode == 1 and json.loads(before.stdout)["op"] == "atan2"
    assert before.stderr.splitlines()[0] == f"root: {root} (--root)"
    named_demo = user.home / "demo"
    shutil.copytree(root, named_demo)
    by_name = user.run("--root", "demo", "config", cwd=user.home)
    assert by_name.returncode == 0 and by_name.stderr.startswith(f"root: {named_demo} (--root)")

    helped = user.run("--help", cwd=inside).stdout
    assert "examples:" in helped and "mps-pipeline demo ~/mps-demo" in helped
    assert "exit status: 0 done; 1 work left" in helped

    config = user.run("config", cwd=inside)
    assert config.stderr.splitlines()[0].startswith("root: ")
    assert not any(line.startswith("root: ") for line in config.stdout.splitlines())

    audit = user.run("audit", "atan2", cwd=inside)
    assert "overloads: 3 (1 to change)" in audit.stdout
    backlog = user.run("backlog", cwd=inside, columns=200)
    assert "overloads to change" in backlog.stdout
    items = json.loads(user.run("backlog", "--json", cwd=inside).stdout)["items"]
    atan2 = next(i for i in items if i["op"] == "atan2")
    assert atan2["overloads"] == 1  # the one audit counts as "to change"

    from docsgen.runs import RUNNERS
    from pipeline.sandbox.demo import sweep

    for runner, macos in RUNNERS.items():
        sweep(root, tmp_path / "results" / runner / "shard-1.xml", macos=macos)
    night = user.run("nightly", "--results", str(tmp_path / "results"), cwd=inside)
    assert night.returncode == 0, night.stdout + night.stderr
    counts = Counter(i["workflow"] for i in items)
    expected = ", ".join(f"{w} {n}" for w, n in counts.items())
    assert f"migration backlog: {len(items)} operators ({expected})\n" in night.stdout


# ------------------------------------------ issue 28: no green verdict that isn't one


def verdict_line(stdout: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith("verdict")]
    return line


def test_28_3_outside_any_checkout_the_verdict_names_the_sandbox_and_the_folder_stays_empty(
    user: User, migrated
) -> None:
    # someone who meant to stand in ~/pytorch: the verdict's own line says which tree it was
    folder = user.home / "meant-to-be-pytorch"
    folder.mkdir()
    for _ in range(2):  # the run (or a no-op, when test 5 migrated the sandbox), then a no-op
        run = user.run("migrate", "atan2", cwd=folder)
        assert run.returncode == 0, run.stdout + run.stderr
        assert verdict_line(run.stdout).startswith(
            "verdict (on the bundled sandbox, not a checkout of yours): atan2: "
        )
        assert run.stderr.startswith("root: the bundled sandbox, working copy ")
        # the sandbox's state is in the user's state folder: nothing of ours in this one
        assert list(folder.iterdir()) == []
        assert f"review `git -C {user.sandbox} diff`" in run.stdout
    assert BINARY_KERNEL_MM in git(user.sandbox, "diff", "--name-only").split()
    # in a checkout the verdict is about that checkout, and says nothing of a sandbox
    _, first, second = migrated
    for done in (first, second):
        assert verdict_line(done.stdout).startswith("verdict: atan2: ")


def test_28_4_a_skipped_check_is_listed_as_not_checked_never_as_passed(
    user_without_torch: User,
) -> None:
    new = user_without_torch
    assert subprocess.run([str(new.python), "-c", "import torch"], cwd=new.home,
                          env=new.env(), capture_output=True).returncode != 0  # fmt: skip
    root = new.demo()
    for _ in range(2):  # the run, then the no-op run: the same verdict
        run = new.run("migrate", "atan2", cwd=root)
        # exit 0: the checklist and the tests pass (README, Exit status); what was not
        # checked is in the verdict's line, never counted as passed
        assert run.returncode == 0, run.stdout + run.stderr
        verdict = verdict_line(run.stdout)
        assert verdict.startswith(
            "verdict: atan2: 8/8 checklist items and the tests pass; not checked: check-math, "
            f"because python={new.python} cannot import torch, which check-math needs for "
            "the reference: point python= (--python, MPS_PIPELINE_PYTHON) at an interpreter "
            "that has it"
        ), verdict
        assert "Every checklist item passes" not in run.stdout
    summary = (root / ".mps-pipeline" / "ops" / "atan2" / "summary.md").read_text()
    assert "Every checklist item passes" not in summary
    # the README says what such a user sees, and how to let check-math run
    sample_intro = " ".join(README.split(BEGIN, 1)[0].rsplit("## Try it", 1)[1].split())
    assert "`check-math skipped: python=… cannot import torch, …`" in sample_intro
    assert (
        "`verdict: atan2: 8/8 checklist items and the tests pass; not checked: check-math, "
        "because python=… cannot import torch, …`" in sample_intro
    )
    assert "`pip install torch` into the venv" in sample_intro
    (zero,) = [line for line in README.splitlines() if line.startswith("| 0 |")]
    assert "not counted as passed" in zero and "not checked: check-math" in zero


def test_28_7_what_the_demo_cannot_run_says_in_one_line_what_it_needs(
    user_without_torch: User,
) -> None:
    """The README's "Try it" names the commands the demo lacks something for; each exits 2
    with one line that says what, and the bare `doit` is shown as `mps-pipeline doit`."""
    new = user_without_torch
    root = new.demo("needs")
    needs = {
        ("check-math", "atan2"): "cannot import torch, which check-math needs",
        ("speed",): "cannot import torch, which speed needs",
        ("pr-report", "--pr", "1"): "$GITHUB_TOKEN is not set",
        ("tracker", "--issue", "1"): "$GITHUB_TOKEN is not set",
    }
    for args, need in needs.items():
        result = new.run(*args, cwd=root)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        (line,) = error_lines(result.stderr)
        assert need in line, (args, line)
        assert "Traceback" not in result.stderr
    intro = " ".join(README.split(BEGIN, 1)[0].rsplit("## Try it", 1)[1].split())
    for command in (
        "`check-math`",
        "`speed`",
        "`pr-report`",
        "`tracker`",
        "`mps-pipeline doit TASK …`",
    ):
        assert command in intro
    assert new.run("doit", "list", cwd=root).returncode == 0


def test_28_8_the_first_count_is_labelled_as_the_state_before_the_migration(migrated) -> None:
    _, first, second = migrated
    assert "\nbefore: 3/8 checks pass\n" in first.stdout
    assert "\n3/8 checks pass" not in first.stdout  # never unlabelled
    assert "checks pass" not in second.stdout  # a no-op run prints no checklist
    assert "before: 3/8 checks pass" in _sample_block()


# -------------------------------------------------------------------- 9. the README


def _sample_block() -> str:
    return README.split(BEGIN, 1)[1].split(END, 1)[0]


def _drift_free(text: str) -> list[tuple[str, list[str]]]:
    """A run's output without what changes from run to run: seconds, and the order doit
    gives stages that do not depend on each other. Per command (``$ ...``), its stage
    sections (a ``.  STAGE`` / ``-- STAGE`` line and what follows it), sorted."""
    text = re.sub(r"\d+\.\d+s\b", "<t>s", text)
    commands = []
    for block in re.split(r"^(?=\$ )", text, flags=re.M):
        sections = re.split(r"^(?=\.  |-- )", block, flags=re.M)
        commands.append((sections[0], sorted(sections[1:])))
    return commands


def test_9_the_readme_shows_a_real_run_and_quotes_no_drifting_number(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first two commands stay as they were: CI runs them
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    assert first_block == (
        "# 1. Set up and run the main job (migrate atan2 from MPSGraph to Metal) on the bundled"
        " sandbox\npython3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
        ".venv/bin/doit migrate_op op=atan2\n\n# 2. Run the tests (nox installs torch==2.13.0, "
        "the CPU wheel, for the real-data tests)\n.venv/bin/nox -s tests\n"
    )
    outside_sample = README.replace(_sample_block(), "")
    assert not re.search(r"\b\d[\d,]*\s+tests\b", outside_sample)
    assert not re.search(r"\b(minutes|about \d+ min)\b", outside_sample)
    assert "docs/performance.md" in README and (REPO / "docs" / "performance.md").is_file()

    # the sample is what the installed tool prints today (seconds aside): generated, not typed,
    # by the same user, whose cache (~/.cache) keeps torch's answers to the demo's questions
    monkeypatch.setenv("XDG_CACHE_HOME", str(user.home / ".cache"))
    fresh = sample_text(python=str(user.python))
    block = _sample_block().strip().removeprefix("```console\n").removesuffix("```")
    assert _drift_free(block) == _drift_free(fresh), "README sample is stale: run nox -s sample"
    assert "verdict: atan2: Every checklist item passes." in block

    # the screenshot the README shows exists and is a PNG
    assert "](docs/img/dashboard.png)" in README
    png = (REPO / "docs" / "img" / "dashboard.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000

    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 70 |", "| 130 |"):
        assert code in README


def test_9_the_nightly_quickstart_runs_as_written(user: User) -> None:
    section = CI_README.split("## Nightly quickstart", 1)[1].split("\n## ", 1)[0]
    for step in ("Register the Mac minis", "Add the labels", "variables and secrets"):
        assert step in section
    (script,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", textwrap.dedent(script)],
        cwd=user.home,
        env=user.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dashboard = user.home / "mps-demo" / ".mps-pipeline" / "dashboard"
    assert f"dashboard: {dashboard}\n" in proc.stdout
    summary = json.loads((dashboard / "summary.json").read_text())
    assert sorted(summary["pass_rate"]) == ["macos-m1-14", "macos-m2-15", "macos-m2-26"]
    assert (dashboard / "index.html").is_file()
    # what the quickstart promises: two nights that wait, then the removal, with its diff
    assert proc.stdout.count("xfail removals: 0\n") == 2
    assert "needed (history has 2 so far)" in proc.stdout
    assert "xfail removals: 1\n  UNIMPLEMENTED_XFAILLIST['atan2']: delete" in proc.stdout
    assert '-            "atan2": [' in proc.stdout
    assert "proposes deleting `UNIMPLEMENTED_XFAILLIST['atan2']`" in " ".join(section.split())
    assert "open the dashboard" in section.lower()


def test_10_smaller_things_say_what_happened_whole_and_once(user: User) -> None:
    """Issue 28, item 8: a file given as --results, a runner folder the config does not
    name, reports without times; each said in one whole line (output to a pipe)."""
    root = user.demo("smaller-things")
    tests = [f"test_output_match_atan2_mps_{d}" for d in ("float32", "float16", "int64", "bool")]
    cases = "".join(
        f'<testcase classname="test.test_mps.TestConsistencyMPS" name="{t}" time="0"/>'
        for t in tests
    )
    results = user.home / "smaller-results"
    for runner in ("macos-m1-14", "macos-m2-15", "macos-m2-l5"):  # the last one a typo
        (results / runner).mkdir(parents=True)
        (results / runner / "shard-1.xml").write_text(
            f'<testsuites><testsuite name="pytest" time="0">{cases}</testsuite></testsuites>'
        )
    report = results / "macos-m1-14" / "shard-1.xml"
    given_a_file = user.run("nightly", "--results", str(report), cwd=root)
    assert given_a_file.returncode == 2
    assert error_lines(given_a_file.stderr) == [
        f"error: --results {report}: a file, not a folder; --results takes a folder of JUnit "
        "reports, one folder per runner configuration in it (results/<runner>/shard-<n>.xml)"
    ]
    night = user.run("nightly", "--results", str(results), cwd=root)
    assert night.returncode == 0, night.stdout + night.stderr
    (typo,) = [line for line in night.stdout.splitlines() if "'macos-m2-l5'" in line]
    assert typo == (  # whole, on one line, though longer than any terminal
        f"warning: {results / 'macos-m2-l5'}: runner folder 'macos-m2-l5' is not among the "
        "config's runners (macos-m1-14, macos-m2-15, macos-m2-26); its reports are recorded as "
        "a runner of its own (add it to `runners:` if it is one, or rename the folder)"
    )
    plan = user.run("shards", "--num-shards", "2", cwd=root)
    assert plan.returncode == 0, plan.stderr
    assert "are all 0 s (reports without times): a plan by count" in plan.stdout
    assert "slowest / mean shard: unknown (no times)" in plan.stdout
    assert "1.000" not in plan.stdout
