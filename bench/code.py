"""The figures issue 30 sets goals for, read from the source: ``python -m bench.code [--json]``.

``pipeline/sandbox`` (the demo's PyTorch-shaped tree) and ``pipeline/run/pytest_plugin`` (run
by the interpreter under test) are left out. They are counts, not timings, so they are exact;
they sit beside the timings because they are quoted the same way, today's figure before the
goal. What each one counts:

- ``string_key_lookups``: ``x["key"]`` (read, write or delete) and ``x.get("key")`` /
  ``x.pop("key")`` / ``x.setdefault("key")`` in ``pipeline/``: a field mypy cannot see;
  ``edge_reads`` says how many of them are ``Fields.pop("key", type)``, a document's key
  read once and checked where the file is read;
- ``str_any_mappings``: ``dict[str, Any]`` and ``Mapping[str, Any]`` (any ``*Mapping``) in
  ``pipeline/``: a value whose shape no type names;
- ``exit_code_mappers``: modules that turn an exception into an exit status (see
  :func:`_maps_errors`);
- ``errors_outside_errors_py``: ``PipelineError`` subclasses (at any depth) defined anywhere
  but ``pipeline/errors.py``;
- ``long_functions``: functions over 80 lines (the house's cap), and the longest;
- ``json_flag_declarations``: ``add_argument("--json", ...)`` calls and ``Option("json", ...)``
  entries of the option table.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "pipeline"
LONG = 80
_STR_ANY = re.compile(r"\b(?:dict|Dict|\w*Mapping)\[str, Any\]")
# the demo tree (PyTorch-shaped fixtures) and the pytest plugin that runs in the interpreter
# under test, importing nothing of ours
_NOT_OURS = frozenset({"sandbox", "pytest_plugin"})
_KEYED_METHODS = frozenset({"get", "pop", "setdefault"})


@dataclass(frozen=True)
class CodeFigures:
    string_key_lookups: int
    edge_reads: int  # of them: Fields.pop("key", type) at a document's edge, checked
    str_any_mappings: int
    exit_code_mappers: tuple[str, ...]
    errors_outside_errors_py: tuple[str, ...]
    long_functions: tuple[str, ...]
    longest_function: int
    json_flag_declarations: int


def _modules(root: Path) -> Iterator[tuple[str, str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        if any(part in _NOT_OURS for part in path.relative_to(root).parts):
            continue
        text = path.read_text(encoding="utf-8")
        yield path.relative_to(root.parent).as_posix(), text, ast.parse(text, str(path))


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _string_key_lookups(tree: ast.Module) -> int:
    return sum(
        1
        for node in ast.walk(tree)
        if (isinstance(node, ast.Subscript) and _is_str(node.slice))
        or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _KEYED_METHODS
            and bool(node.args)
            and _is_str(node.args[0])
        )
    )


_TYPES = frozenset({"str", "int", "bool", "float", "list", "dict"})


def _edge_reads(tree: ast.Module) -> int:
    """``f.pop("key", str, ...)``: a key read once and checked for its type where the
    document is read (:class:`pipeline.fields.Fields`), not a lookup deep in the code. A
    kind may be a module-level name for one (``_NULL = type(None)``) or a tuple of them
    spread (``*_EXPR``)."""

    def a_type(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in _TYPES) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "type"
        )  # fmt: skip

    named = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        and (
            a_type(node.value)
            or (isinstance(node.value, ast.Tuple) and all(a_type(e) for e in node.value.elts))
        )
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def a_kind(node: ast.expr) -> bool:
        if isinstance(node, ast.Starred):
            node = node.value
        return a_type(node) or (isinstance(node, ast.Name) and node.id in named)

    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "pop"
        and len(node.args) >= 2
        and _is_str(node.args[0])
        and all(a_kind(a) for a in node.args[1:])
    )


def _maps_errors(tree: ast.Module) -> bool:
    """Whether the module decides an exception's exit status: it reads an error's
    ``exit_code`` or gives a class one, or has an ``except`` clause that names an ``EXIT_*``
    constant, returns an int or makes doit's ``TaskError``/``TaskFailed`` of what it caught.
    (Turning a status already decided into doit's result type is not deciding it.)"""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "exit_code":
            return True
        if isinstance(node, ast.ClassDef) and any(
            isinstance(t, ast.Name) and t.id == "exit_code"
            for stmt in node.body
            if isinstance(stmt, (ast.Assign, ast.AnnAssign))
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        ):
            return True
    for handler in ast.walk(tree):
        if not isinstance(handler, ast.ExceptHandler):
            continue
        for node in ast.walk(handler):
            if isinstance(node, ast.Name) and (
                node.id.startswith("EXIT_") or node.id in {"TaskError", "TaskFailed"}
            ):
                return True
            if (
                isinstance(node, ast.Return)
                and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int
            ):
                return True
    return False


def _pipeline_errors(classes: dict[str, list[tuple[str, list[str]]]]) -> list[str]:
    """Where each class that derives from PipelineError (by base name) is defined."""
    known = {"PipelineError"}
    grew = True
    while grew:
        grew = False
        for name, defs in classes.items():
            if name not in known and any(known & set(bases) for _, bases in defs):
                known.add(name)
                grew = True
    return sorted(
        f"{module}:{name}"
        for name in known - {"PipelineError"}
        for module, _ in classes[name]
        if module != "pipeline/errors.py"
    )


def _declares_json(call: ast.Call) -> bool:
    """``add_argument("--json", ...)``, or the option table's ``Option("json", ...)``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "add_argument":
        return any(_is_str(a) and a.value == "--json" for a in call.args)
    if isinstance(func, ast.Name) and func.id == "Option" and call.args:
        first = call.args[0]
        return isinstance(first, ast.Constant) and first.value == "json"
    return False


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def measure(root: Path = PACKAGE) -> CodeFigures:
    lookups = edge = mappings = flags = 0
    mappers: list[str] = []
    classes: dict[str, list[tuple[str, list[str]]]] = {}
    long: list[tuple[int, str]] = []
    longest = 0
    for module, text, tree in _modules(root):
        lookups += _string_key_lookups(tree)
        edge += _edge_reads(tree)
        mappings += len(_STR_ANY.findall(text))
        if _maps_errors(tree):
            mappers.append(module)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [_base_name(b) for b in node.bases]
                classes.setdefault(node.name, []).append((module, bases))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                longest = max(longest, lines)
                if lines > LONG:
                    long.append((lines, f"{module}:{node.name} ({lines})"))
            elif isinstance(node, ast.Call) and _declares_json(node):
                flags += 1
    return CodeFigures(
        string_key_lookups=lookups,
        edge_reads=edge,
        str_any_mappings=mappings,
        exit_code_mappers=tuple(mappers),
        errors_outside_errors_py=tuple(_pipeline_errors(classes)),
        long_functions=tuple(where for _, where in sorted(long, reverse=True)),
        longest_function=longest,
        json_flag_declarations=flags,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.code", description=__doc__)
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    parser.add_argument("--root", type=Path, default=PACKAGE, help="the package to read")
    args = parser.parse_args(argv)
    figures = measure(args.root)
    if args.json:
        print(json.dumps(asdict(figures), indent=2))
        return 0
    print(f"string-key lookups:                 {figures.string_key_lookups}   (goal <= 150)")
    print(f"    of them checked edge reads:     {figures.edge_reads}")
    print(f"dict/Mapping[str, Any]:             {figures.str_any_mappings}   (goal <= 10)")
    print(f"modules mapping errors to exits:    {len(figures.exit_code_mappers)}   (goal 1)")
    for module in figures.exit_code_mappers:
        print(f"    {module}")
    print(f"PipelineErrors outside errors.py:   {len(figures.errors_outside_errors_py)}   (goal 0)")
    for where in figures.errors_outside_errors_py:
        print(f"    {where}")
    print(
        f"functions over {LONG} lines:           {len(figures.long_functions)}   (goal 0; "
        f"longest {figures.longest_function})"
    )
    for where in figures.long_functions:
        print(f"    {where}")
    print(f"--json declarations:                {figures.json_flag_declarations}   (goal 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
