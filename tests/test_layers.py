"""The package's import rules: layers import one way, and the doit start-up stays lean.

Read statically with ``ast`` (every ``import`` anywhere in a module, lazy ones included), so
a rule holds for code paths no test happens to run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        if "sandbox/tree" in path.as_posix():  # the sandbox's PyTorch-shaped tree, not ours
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out[name] = path
    return out


MODULES = _modules()


def imports(module: str) -> set[str]:
    """Every module ``module`` imports (absolute names), at any depth of its code."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m == "pipeline" or m.startswith("pipeline.")}


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _importers_of(package: str) -> set[str]:
    return {m for m in MODULES if not _in(m, package) and any(_in(i, package) for i in imports(m))}


def test_only_the_cli_entry_point_imports_the_commands() -> None:
    # __main__ imports the one command it runs by name, to keep start-up small
    assert _importers_of("pipeline.commands") <= {"pipeline.__main__"}
    assert "pipeline.commands." in MODULES["pipeline.__main__"].read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        # reading the tree knows nothing of settings, edits, runs, results or reports
        (
            "pipeline.tree",
            (
                "pipeline.config",
                "pipeline.edit",
                "pipeline.run",
                "pipeline.results",
                "pipeline.report",
                "pipeline.guide",
                "pipeline.tasks",
                "pipeline.state",
            ),
        ),
        (
            "pipeline.edit",
            ("pipeline.run", "pipeline.results", "pipeline.report", "pipeline.guide"),
        ),
        ("pipeline.run", ("pipeline.edit", "pipeline.report", "pipeline.guide")),
        ("pipeline.results", ("pipeline.report", "pipeline.tasks", "pipeline.guide")),
        ("pipeline.guide", ("pipeline.tasks",)),
        ("pipeline.config", ("pipeline.sandbox", "pipeline.workspace", "pipeline.guide")),
    ],
)
def test_layers_import_one_way(layer: str, forbidden: tuple[str, ...]) -> None:
    bad = {
        (m, i)
        for m in MODULES
        if _in(m, layer)
        for i in imports(m)
        if any(_in(i, f) for f in forbidden)
    }
    assert bad == set()


def test_tasks_import_the_core_without_module_name_strings() -> None:
    source = MODULES["pipeline.tasks"].read_text(encoding="utf-8")
    assert "import_module" not in source and "importlib" not in source
    graph = MODULES["pipeline.guide.graph"].read_text(encoding="utf-8")
    assert "import_module" not in graph and "importlib" not in graph


def test_config_is_pure_it_creates_nothing(tmp_path: Path) -> None:
    from pipeline.config import load_settings

    settings = load_settings({"state_dir": str(tmp_path / "state")}, env={}, cwd=tmp_path)
    assert settings.is_sandbox and not settings.root.exists()
    assert list(tmp_path.iterdir()) == []


def test_doit_start_up_imports_neither_the_stages_nor_the_runners() -> None:
    heavy = (
        "pipeline.guide.stages",
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
    heavy = ("pipeline.guide.stages", "pipeline.run.build", "pipeline.run.tests", "libcst")
    code = (
        f"import sys, pipeline.guide.audit; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
