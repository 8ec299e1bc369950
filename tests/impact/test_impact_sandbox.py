"""The impact analysis on a git copy of the bundled sandbox, one real commit per rule."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pipeline import sandbox
from pipeline.impact import (
    Impact,
    analyze,
    changed_files,
    classify,
    load_view,
    selection_report,
)
from pipeline.impact.changes import ChangedFile
from pipeline.tree import common_mps
from pipeline.tree.opinfo import load_table

YAML = "aten/src/ATen/native/native_functions.yaml"
KERNELS = "aten/src/ATen/native/mps/kernels/"
OPERATIONS = "aten/src/ATen/native/mps/operations/"
BINARY_METAL = KERNELS + "BinaryKernel.metal"
UNARY_METAL = KERNELS + "UnaryKernel.metal"
BINARY_OPS_MM = OPERATIONS + "BinaryOps.mm"
BINARY_KERNEL_MM = OPERATIONS + "BinaryKernel.mm"
UNARY_KERNEL_MM = OPERATIONS + "UnaryKernel.mm"
COMMON_MPS = "torch/testing/_internal/common_mps.py"
OPINFOS = load_table(sandbox.TREE / sandbox.OPINFO_TABLE)


def _edit(root: Path, edits: dict[str, tuple[str, str] | str]) -> None:
    for rel, edit in edits.items():
        path = root / rel
        if isinstance(edit, str):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(edit)
            continue
        text = path.read_text()
        assert text.count(edit[0]) == 1, f"{edit[0]!r} must occur once in {rel}"
        path.write_text(text.replace(edit[0], edit[1]))


def commit(root: Path, edits: dict[str, tuple[str, str] | str]) -> Impact:
    """Make the edits, commit them, and analyse that commit against its parent."""
    _edit(root, edits)
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "edit"], check=True)
    changes = changed_files(root, "HEAD~1", "HEAD")
    return analyze(changes, opinfos=OPINFOS, view=load_view(root, "HEAD"))


def _tests_of(*names: str) -> set[str]:
    return {t for i in OPINFOS if i.name in names for t in i.test_ids("output_match")}


def reasons(impact: Impact) -> str:
    return "\n".join(r for op in impact.operators for r in op.reasons)


TOTAL = len(_tests_of(*{i.name for i in OPINFOS}))


def test_yaml_dispatch_change_selects_that_operator_and_needs_a_build(sandbox_tree: Path) -> None:
    impact = commit(sandbox_tree, {YAML: ("    MPS: exp2_out_mps\n", "    MPS: exp2_out\n")})
    assert impact.operator_names == ("exp2",)
    assert "dispatch of exp2.out changed (MPS: exp2_out_mps -> exp2_out)" in reasons(impact)
    assert impact.build_needed and not impact.full_sweep
    assert set(impact.test_ids) == _tests_of("exp2")
    assert impact.total == TOTAL and impact.fraction < 0.1


def test_yaml_comment_only_change_selects_nothing(sandbox_tree: Path) -> None:
    text = (sandbox_tree / YAML).read_text()
    first_comment = next(line for line in text.splitlines() if line.startswith("#"))
    impact = commit(sandbox_tree, {YAML: (first_comment, first_comment + " (reworded)")})
    assert impact.operators == () and impact.selected == 0
    assert not impact.build_needed and not impact.full_sweep


def test_functor_body_edit(sandbox_tree: Path) -> None:
    impact = commit(
        sandbox_tree,
        {BINARY_METAL: ("precise::sqrt(fa * fa + fb * fb)", "precise::sqrt(fma(fa, fa, fb * fb))")},
    )
    assert impact.operator_names == ("hypot",)
    assert impact.build_needed and set(impact.test_ids) == _tests_of("hypot")


def test_kernel_name_maps_to_the_operator_through_the_stub(sandbox_tree: Path) -> None:
    impact = commit(
        sandbox_tree,
        {
            BINARY_METAL: (
                "return T(::metal::trunc(c10::metal::div(a, b)));",
                "return T(::metal::trunc(a / b));",
            )
        },
    )
    assert impact.operator_names == ("div",)
    assert "functor div_trunc_functor changed (kernel div_trunc run by div_trunc_stub)" in reasons(
        impact
    )
    assert set(impact.test_ids) == _tests_of("div")


def test_registration_lines(sandbox_tree: Path) -> None:
    impact = commit(
        sandbox_tree,
        {
            BINARY_METAL: (
                "REGISTER_FLOAT_BINARY_OP(hypot);\n",
                "REGISTER_OPMATH_FLOAT_BINARY_OP(hypot);\n",
            )
        },
    )
    assert impact.operator_names == ("hypot",)
    # one line of a file-local macro registers several kernels
    impact = commit(
        sandbox_tree,
        {UNARY_METAL: ("INSTANTIATE_UNARY_KERNELS2(float, short);\n", "")},
    )
    assert set(impact.operator_names) == {"erfinv", "exp2", "sinc"}


def test_shared_helper_in_metal_fans_out_to_its_users(sandbox_tree: Path) -> None:
    helper = "inline float sq(float x) {\n  return x * x;\n}\n\nstruct hypot_functor {"
    commit(
        sandbox_tree,
        {
            BINARY_METAL: ("struct hypot_functor {", helper),
        },
    )
    _edit(sandbox_tree, {BINARY_METAL: ("fa * fa + fb * fb", "sq(fa) + sq(fb)")})
    impact = commit(
        sandbox_tree,
        {
            BINARY_METAL: (
                "return static_cast<T>(precise::atan2(float(a), float(b)));",
                "return static_cast<T>(precise::atan2(float(a), sq(1.0f) * float(b)));",
            )
        },
    )
    assert set(impact.operator_names) == {"hypot", "atan2"}  # the edit and sq's use in atan2
    impact = commit(sandbox_tree, {BINARY_METAL: ("  return x * x;\n", "  return x * x + 0.0f;\n")})
    assert set(impact.operator_names) == {"hypot", "atan2"}
    assert "shared helper sq changed" in reasons(impact)


def test_registration_macro_fans_out_to_what_it_registers(sandbox_tree: Path) -> None:
    impact = commit(
        sandbox_tree,
        {
            BINARY_METAL: (
                "  REGISTER_BINARY_OP(NAME, bool, float)\n",
                "  REGISTER_BINARY_OP(NAME, bool, half)\n",
            )
        },
    )
    assert set(impact.operator_names) == {"atan2", "copysign", "div"}
    assert "shared macro REGISTER_INT2FLOAT_BINARY_OP changed" in reasons(impact)


def test_header_under_kernels_fans_out_to_every_includer(sandbox_tree: Path) -> None:
    header = KERNELS + "BinaryHelpers.h"
    commit(
        sandbox_tree,
        {
            header: "#pragma once\ninline float half_of(float x) {\n  return x / 2;\n}\n",
            BINARY_METAL: (
                "#include <metal_stdlib>\n",
                "#include <metal_stdlib>\n#include <ATen/native/mps/kernels/BinaryHelpers.h>\n",
            ),
        },
    )
    impact = commit(sandbox_tree, {header: ("return x / 2;", "return x * 0.5f;")})
    assert set(impact.operator_names) == {
        "atan2",
        "copysign",
        "div",
        "fmod",
        "hypot",
        "lt",
        "maximum",
    }
    assert "BinaryHelpers.h:3 header changed (included by BinaryKernel.metal)" in reasons(impact)
    assert impact.build_needed and not impact.full_sweep


def test_mm_stub_kernel_register_line_and_mpsgraph_implementation(sandbox_tree: Path) -> None:
    impact = commit(
        sandbox_tree,
        {
            BINARY_KERNEL_MM: (
                'lib.exec_binary_kernel(iter, "maximum");',
                'lib.exec_binary_kernel(iter, "maximum");  // NaN-propagating\n  (void)iter;',
            )
        },
    )
    assert impact.operator_names == ("maximum",)
    impact = commit(
        sandbox_tree,
        {
            UNARY_KERNEL_MM: (
                "REGISTER_UNARY_TI_DISPATCH(sinc);",
                "REGISTER_UNARY_TI_DISPATCH(sinc)",
            )
        },
    )
    assert impact.operator_names == ("sinc",)
    impact = commit(
        sandbox_tree,
        {
            BINARY_OPS_MM: (
                "// fmod(a, b) = a - trunc(a / b) * b, all in the input precision\n",
                "// fmod(a, b) = a - trunc(a / b) * b\n",
            )
        },
    )
    assert impact.operators == ()  # a comment
    impact = commit(
        sandbox_tree,
        {
            BINARY_OPS_MM: (
                "auto truncated = [mpsGraph truncateWithTensor:quotient name:nil];",
                "auto truncated = [mpsGraph floorWithTensor:quotient name:nil];",
            )
        },
    )
    assert impact.operator_names == ("fmod",)
    assert "MPSGraph implementation fmod_mps_out changed (MPS kernel of fmod)" in reasons(impact)
    impact = commit(
        sandbox_tree,
        {
            BINARY_OPS_MM: (
                "(lt_scalar_out_mps, lessThan, Scalar);",
                "(lt_scalar_out_mps, lessThanOrEqualTo, Scalar);",
            )
        },
    )
    assert impact.operator_names == ("lt",)


def test_mpsgraph_helper_and_operation_utils_mean_full_sweep(sandbox_tree: Path) -> None:
    impact = commit(
        sandbox_tree,
        {
            BINARY_OPS_MM: (
                "  if (self.numel() == 0 || other.numel() == 0) {",
                "  if (self.numel() == 0) {",
            )
        },
    )
    assert impact.full_sweep and impact.build_needed and impact.selected == impact.total == TOTAL
    assert "BinaryOps.mm:" in impact.full_sweep_reasons[0]
    assert "shared host code changed" in impact.full_sweep_reasons[0]
    impact = commit(sandbox_tree, {"aten/src/ATen/native/mps/OperationUtils.mm": "// utils\n"})
    assert impact.full_sweep and impact.build_needed
    assert impact.full_sweep_reasons == (
        "aten/src/ATen/native/mps/OperationUtils.mm changed: shared MPS infrastructure",
    )


def test_common_mps_entry_selects_its_opinfo_without_a_build(sandbox_tree: Path) -> None:
    hypot = '            "hypot": None,\n            "xlogy": None,\n'
    new = hypot.replace('"hypot": None', '"hypot": [torch.int64]')
    impact = commit(sandbox_tree, {COMMON_MPS: (hypot, new)})
    assert impact.operator_names == ("hypot",) and not impact.build_needed
    assert set(impact.test_ids) == _tests_of("hypot")
    # a key naming one variant selects only that variant's tests
    text = (sandbox_tree / COMMON_MPS).read_text()
    entry = next(
        e
        for e in common_mps.parse(text, COMMON_MPS).entries
        if e.key == "divtrunc_rounding" and e.function == "mps_ops_modifier"
    )
    lines = text.splitlines(keepends=True)
    del lines[entry.span.start - 1 : entry.span.end]
    impact = commit(sandbox_tree, {COMMON_MPS: "".join(lines)})
    assert impact.operator_names == ("div",)
    assert impact.test_ids and all("_div_trunc_rounding_mps_" in t for t in impact.test_ids)


def test_test_mps_is_a_full_sweep_without_a_build(sandbox_tree: Path) -> None:
    text = (sandbox_tree / "test/test_mps.py").read_text()
    impact = commit(sandbox_tree, {"test/test_mps.py": text + "\n# touched\nX = 1\n"})
    assert impact.full_sweep and not impact.build_needed and impact.selected == TOTAL


def test_docs_and_other_backends_are_ignored(sandbox_tree: Path) -> None:
    impact = commit(
        sandbox_tree,
        {
            "docs/source/notes/mps.rst": "MPS notes\n",
            "README.md": ("# mps-pipeline sandbox", "# sandbox"),
        },
    )
    assert impact.ignored == ("README.md", "docs/source/notes/mps.rst")
    assert impact.operators == () and impact.selected == 0 and not impact.build_needed


def test_shared_structured_kernel_in_cpp(sandbox_tree: Path) -> None:
    cpp = "aten/src/ATen/native/BinaryOps.cpp"
    copysign = "  copysign_stub(device_type(), *this);"
    impact = commit(sandbox_tree, {cpp: (copysign, copysign + "\n  (void)self;")})
    assert impact.operator_names == ("copysign",) and impact.build_needed
    assert "structured kernel copysign_out changed (MPS shares it)" in reasons(impact)
    # MPS does not run hypot_out (no MPS row): other backends' business
    hypot = "  hypot_stub(device_type(), *this);"
    impact = commit(sandbox_tree, {cpp: (hypot, hypot + "\n  (void)self;")})
    assert impact.operators == () and impact.ignored == (cpp,) and not impact.build_needed


def test_shared_cpp_that_does_not_lex_means_full_sweep(sandbox_tree: Path) -> None:
    cpp = "aten/src/ATen/native/BinaryOps.cpp"
    copysign = "  copysign_stub(device_type(), *this);"
    impact = commit(sandbox_tree, {cpp: (copysign, copysign + '\n  auto s = "open;')})
    assert impact.full_sweep and impact.build_needed and impact.ignored == ()
    assert "unterminated string literal: its MPS code is unknown" in impact.full_sweep_reasons[0]


def test_stub_declaration_in_a_shared_header(sandbox_tree: Path) -> None:
    header = "aten/src/ATen/native/BinaryOps.h"
    assert classify(header) == "shared_header"
    assert classify("aten/src/ATen/native/cpu/Loops.h") == "ignored"
    div_trunc = "DECLARE_DISPATCH(binary_fn, div_trunc_stub);"
    line = (sandbox_tree / header).read_text().splitlines().index(div_trunc) + 1
    impact = commit(
        sandbox_tree, {header: (div_trunc, div_trunc.replace("binary_fn", "structured_binary_fn"))}
    )
    assert impact.operator_names == ("div",) and impact.build_needed and not impact.full_sweep
    assert f"BinaryOps.h:{line} declaration of div_trunc_stub changed (MPS registers it)" in (
        reasons(impact)
    )
    # an alias reaches every stub MPS registers that is declared with it
    alias = "using structured_binary_fn = void (*)(TensorIteratorBase&);"
    impact = commit(sandbox_tree, {header: (alias, alias.replace("&)", "& iter)"))})
    assert impact.operator_names == ("copysign", "div", "maximum") and impact.build_needed
    assert "type alias structured_binary_fn of copysign_stub changed" in reasons(impact)
    # MPS registers no hypot_stub, and comments change no type
    hypot = "DECLARE_DISPATCH(structured_binary_fn, hypot_stub)"
    impact = commit(sandbox_tree, {header: (hypot, hypot + ";")})
    assert impact.operators == () and impact.ignored == (header,) and not impact.build_needed
    impact = commit(sandbox_tree, {header: ("#pragma once\n", "#pragma once\n// stubs\n")})
    assert impact.operators == () and impact.ignored == (header,) and not impact.build_needed
    # a function type no stub of this header uses: other headers' stubs are not followed
    spare = "using spare_fn = void (*)(TensorIterator&);\n"
    renamed = alias.replace("&)", "& iter)")
    impact = commit(sandbox_tree, {header: (renamed, renamed + "\n" + spare)})
    assert any("function type spare_fn changed" in w for w in impact.warnings)


def test_shared_header_that_does_not_lex_means_full_sweep(sandbox_tree: Path) -> None:
    header = "aten/src/ATen/native/UnaryOps.h"
    impact = commit(sandbox_tree, {header: ("#pragma once\n", "#pragma once\n/* open\n")})
    assert impact.full_sweep and impact.build_needed
    assert "its stub declarations are unknown" in impact.full_sweep_reasons[0]


# --- selection figures -------------------------------------------------------------------


# the operator each functor serves, where its kernel name is not the operator's
FUNCTOR_OPERATOR = {"div_true": "div", "div_floor": "div", "div_trunc": "div"}


def _single_op_cases(root: Path) -> list[tuple[str, tuple[ChangedFile, ...]]]:
    """One edit per functor body and per MPS dispatch row of the sandbox, as ChangedFiles."""
    from pipeline.tree import metal, native_yaml

    cases = []
    for path in sorted((root / KERNELS).glob("*.metal")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        for functor in metal.parse(text, rel).functors:
            if functor.macro:
                continue
            body = functor.span.start + 1  # first line inside the struct
            new = lines[: body - 1] + [lines[body - 1].rstrip("\n") + " // edited\n"]
            new += lines[body:]
            change = ChangedFile(rel, "M", text, "".join(new), ((body, body),), ((body, body),))
            cases.append((FUNCTOR_OPERATOR.get(functor.name, functor.name), (change,)))
    text = (root / YAML).read_text()
    lines = text.splitlines(keepends=True)
    for entry in native_yaml.parse(text, YAML).entries:
        row = next((r for r in entry.dispatch if "MPS" in r.keys), None)
        if row is None:
            continue
        new = list(lines)
        new[row.line - 1] = new[row.line - 1].replace(row.kernel, row.kernel + "_v2")
        change = ChangedFile(
            YAML, "M", text, "".join(new), ((row.line, row.line),), ((row.line, row.line),)
        )
        cases.append((entry.operator, (change,)))
    return cases


def test_single_operator_changes_select_a_small_fraction_and_miss_nothing(
    sandbox_tree: Path,
) -> None:
    cases = _single_op_cases(sandbox_tree)
    assert len(cases) >= 15
    rows = selection_report(sandbox_tree, OPINFOS, cases)
    assert not [r for r in rows if r["missed"]]
    assert not [r for r in rows if r["full_sweep"]]
    # each selects its own operator's tests and nothing else
    for row in rows:
        assert row["affected"] == [row["operator"]], row
        assert row["selected"] == row["own_tests"], row
    worst = max(r["fraction"] for r in rows)
    mean = sum(r["fraction"] for r in rows) / len(rows)
    print(f"\nsandbox single-op changes: {len(rows)}, mean selected {mean:.1%}, max {worst:.1%}")


# --- the command -------------------------------------------------------------------------


def _run_cli(root: Path, tmp_path: Path, capsys, *argv: str) -> str:
    import argparse
    import dataclasses

    from pipeline.commands import affected as cli
    from pipeline.config import load_settings

    settings = load_settings({"root": str(root), "state_dir": str(tmp_path / "state")})
    settings = dataclasses.replace(settings, opinfo_table=root / sandbox.OPINFO_TABLE)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(argv), settings) == 0
    return capsys.readouterr().out


def test_command_text_json_and_changed_lines(sandbox_tree: Path, tmp_path: Path, capsys) -> None:
    import json

    _edit(sandbox_tree, {YAML: ("    MPS: exp2_out_mps\n", "    MPS: exp2_out\n")})
    out = _run_cli(sandbox_tree, tmp_path, capsys, "--base", "HEAD")
    assert out.startswith("1 operator(s); build needed; ")
    assert "  exp2\n    - native_functions.yaml:" in out
    data = json.loads(_run_cli(sandbox_tree, tmp_path, capsys, "--base", "HEAD", "--json"))
    assert [o["operator"] for o in data["operators"]] == ["exp2"]
    assert data["build_needed"] and data["selected"] == len(_tests_of("exp2"))
    line = (sandbox_tree / YAML).read_text().splitlines().index("    MPS: exp2_out") + 1
    data = json.loads(
        _run_cli(sandbox_tree, tmp_path, capsys, "--changed", f"{YAML}:{line}", "--json")
    )
    assert [o["operator"] for o in data["operators"]] == ["exp2"]
