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
        c["layers"]
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers"
    ]
    declared = {name.strip() for layer in layers for name in layer.split("|")}
    top = {".".join(m.split(".")[:2]) for m in MODULES if m != "pipeline"}
    assert top - declared == set()


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
