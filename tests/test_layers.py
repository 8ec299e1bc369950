"""What import-linter cannot say: the doit start-up stays lean, and config creates nothing.

The layers themselves, the absence of cycles and the independence of the commands are
import-linter contracts in pyproject.toml, checked by ``nox -s lint``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"


MODULES = {
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
    for p in PACKAGE.rglob("*.py")
    if "sandbox/tree" not in p.as_posix()  # the sandbox's PyTorch-shaped tree, not ours
}


def test_every_module_has_a_layer() -> None:
    # import-linter checks only the packages a contract names: a new top-level module must
    # find its layer in pyproject.toml before it is covered
    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [
        c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    declared = {name.strip() for layer in layers for name in layer.split("|")}
    top = {".".join(m.split(".")[:2]) for m in MODULES if m != "pipeline"}
    assert top - declared == set()


def test_no_module_is_over_700_lines() -> None:
    """A module a newcomer can read at one sitting (issue 15); the sandbox's PyTorch-shaped
    tree is data, not ours to size."""
    tree = PACKAGE / "sandbox" / "tree"
    sizes = {
        str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
        for p in PACKAGE.rglob("*.py")
        if not p.is_relative_to(tree)
    }
    assert {p: n for p, n in sizes.items() if n > 700} == {}


def test_tasks_import_the_core_without_module_name_strings() -> None:
    source = MODULES["pipeline.tasks"].read_text(encoding="utf-8")
    assert "import_module" not in source and "importlib" not in source
    graph = MODULES["pipeline.flows.migrate"].read_text(encoding="utf-8")
    assert "import_module" not in graph and "importlib" not in graph


def test_config_is_pure_it_creates_nothing(tmp_path: Path) -> None:
    from pipeline.config import load_settings

    settings = load_settings({"state_dir": str(tmp_path / "state")}, env={}, cwd=tmp_path)
    assert settings.is_sandbox and not settings.root.exists()
    assert list(tmp_path.iterdir()) == []


def test_doit_start_up_imports_neither_the_stages_nor_the_runners() -> None:
    heavy = (
        "pipeline.flows.stages",
        "pipeline.guide.plan",
        "pipeline.run.build",
        "pipeline.run.tests",
        "pipeline.edit.transaction",
        "rich",
        "libcst",
    )
    code = f"import sys, pipeline.tasks; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_audit_stage_imports_no_runner_or_editor() -> None:
    heavy = ("pipeline.flows.stages", "pipeline.run.build", "pipeline.run.tests", "libcst")
    code = (
        f"import sys, pipeline.flows.audit; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _imported(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}; import sys; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return set(out.stdout.split())


def test_doit_start_up_neither_imports_yaml_nor_what_only_errors_need() -> None:
    # yaml only when the settings are resolved afresh (workspace.load's memo missed);
    # difflib only for a mistyped name, subprocess and the sandbox only for a new state
    # folder or working copy
    doit = _imported("import doit.doit_cmd, doit.loader")
    imported = _imported(
        "import doit.doit_cmd, doit.loader, pipeline.tasks, pipeline.workspace, pipeline.flows.hold"
    )
    lean = {"yaml", "difflib", "secrets", "tempfile", "subprocess", "pipeline.sandbox"}
    assert not lean & (imported - doit)


def test_the_cli_replay_imports_nothing_of_the_settings() -> None:
    # what `mps-pipeline audit OP` imports before its replay (pipeline.flows.audit_replay): no
    # argparse, no settings, no yaml, no typed errors (see tests/flows/test_audit_replay_witness.py)
    imported = _imported("import pipeline.__main__, pipeline.flows.audit_replay, pipeline.fsio")
    heavy = {"argparse", "yaml", "pipeline.config", "pipeline.errors", "pipeline.state"}
    assert not heavy & imported
    assert not {"typing", "dataclasses", "hashlib", "tempfile"} & (imported - _imported("pass"))
