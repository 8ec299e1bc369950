"""Each rule of the impact analysis, on a small tree of our own (tests/fixtures/impact/tree)
with real git commits: helpers, macros, headers and host code the sandbox may not have."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.impact import (
    ChangedFile,
    Impact,
    analyze,
    changed_files,
    changes_from_list,
    load_view,
)
from pipeline.report.impact import render_text
from pipeline.tree.opinfo import OpInfoRecord
from tests.conftest import FIXTURES, git_init

YAML = "aten/src/ATen/native/native_functions.yaml"
BINARY_METAL = "aten/src/ATen/native/mps/kernels/Binary.metal"
BINARY_MM = "aten/src/ATen/native/mps/operations/Binary.mm"
COMMON_MPS = "torch/testing/_internal/common_mps.py"
DEFS = "torch/testing/_internal/opinfo/definitions/binaryish.py"
DTYPES = ("float32", "float16", "int32")


def info(name: str, variant: str = "", aten: str | None = None, aliases=()) -> OpInfoRecord:
    return OpInfoRecord(
        name=name,
        variant_test_name=variant,
        aten_name=aten or name,
        aliases=tuple(aliases),
        dtypes=DTYPES,
        decorators=(),
    )


OPINFOS = (
    info("atan2", aliases=("arctan2",)),
    info("hypot"),
    info("logaddexp"),
    info("div", "no_rounding_mode"),
    info("div", "trunc_rounding"),
    info("gcd"),
    info("lcm"),
    info("erf"),
    info("nn.functional.relu", aten="relu"),
    info("sum"),
)
TOTAL = len(OPINFOS) * len(DTYPES)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "impact" / "tree", root)
    git_init(root)
    return root


def commit(root: Path, edits: dict[str, tuple[str, str] | str | None]) -> Impact:
    """Apply ``{path: (old, new) | whole text | None (delete)}``, commit, analyse HEAD~1..HEAD."""
    for path, edit in edits.items():
        file = root / path
        if edit is None:
            file.unlink()
        elif isinstance(edit, tuple):
            text = file.read_text()
            assert edit[0] in text, f"{edit[0]!r} not in {path}"
            file.write_text(text.replace(edit[0], edit[1], 1))
        else:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(edit)
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "edit"], check=True)
    changes = changed_files(root, "HEAD~1", "HEAD")
    return analyze(changes, opinfos=OPINFOS, view=load_view(root, "HEAD"))


def ops(impact: Impact) -> set[str]:
    return set(impact.operator_names)


def reasons(impact: Impact) -> str:
    return "\n".join(r for op in impact.operators for r in op.reasons)


# --- native_functions.yaml ---------------------------------------------------------------


def test_yaml_dispatch_fold_affects_that_operator_only(tree: Path) -> None:
    impact = commit(
        tree,
        {
            YAML: (
                "    CPU, CUDA: logaddexp_out\n    MPS: logaddexp_out_mps  # still MPSGraph\n",
                "    CPU, CUDA, MPS: logaddexp_out\n",
            )
        },
    )
    assert ops(impact) == {"logaddexp"}
    assert "dispatch of logaddexp.out changed (MPS: logaddexp_out_mps -> logaddexp_out)" in reasons(
        impact
    )
    assert impact.build_needed and not impact.full_sweep
    assert impact.selected == len(DTYPES) and impact.total == TOTAL
    assert all("_logaddexp_mps_" in t for t in impact.test_ids)


def test_yaml_comment_and_blank_lines_affect_nothing(tree: Path) -> None:
    impact = commit(
        tree,
        {
            YAML: (
                "    MPS: logaddexp_out_mps  # still MPSGraph\n",
                "    MPS: logaddexp_out_mps  # MPSGraph, migration pending\n\n# moved\n",
            )
        },
    )
    assert impact.operators == () and impact.selected == 0
    assert not impact.build_needed and not impact.full_sweep


def test_yaml_added_entry_and_schema_change(tree: Path) -> None:
    added = (
        "\n- func: gcd_(Tensor(a!) self, Tensor other) -> Tensor(a!)\n"
        "  structured_delegate: gcd.out\n"
    )
    impact = commit(
        tree,
        {YAML: ("- func: erf.out(Tensor self, *,", "- func: erf.out(Tensor self, int k=0, *,")},
    )
    assert ops(impact) == {"erf"} and "schema of erf.out changed" in reasons(impact)
    text = (tree / YAML).read_text() + added
    impact = commit(tree, {YAML: text})
    assert ops(impact) == {"gcd"} and "gcd_ added" in reasons(impact)


def test_yaml_from_a_list_of_lines(tree: Path) -> None:
    lines = (tree / YAML).read_text().splitlines()
    at = lines.index("    MPS: logaddexp_out_mps  # still MPSGraph") + 1
    impact = analyze(
        changes_from_list(tree, [(YAML, [(at, at)]), (YAML, [(1, 1)])]),
        opinfos=OPINFOS,
        view=load_view(tree),
    )
    assert ops(impact) == {"logaddexp"}


# --- .metal ------------------------------------------------------------------------------


def test_functor_body_edit_affects_its_operator(tree: Path) -> None:
    impact = commit(
        tree, {BINARY_METAL: ("precise::atan2(float(a), float(b))", "::metal::atan2(a, b)")}
    )
    assert ops(impact) == {"atan2"}
    assert "Binary.metal:28 functor atan2_functor changed" in reasons(impact)
    assert impact.build_needed
    # atan2's OpInfo is found by name; its alias needs no separate tests
    assert impact.selected == len(DTYPES)


def test_functor_used_by_another_functor_reaches_both(tree: Path) -> None:
    impact = commit(
        tree, {BINARY_METAL: ("      y = c;\n", "      y = c; // swap\n      y = y;\n")}
    )
    assert ops(impact) == {"gcd", "lcm"}


def test_kernel_name_maps_through_the_stub(tree: Path) -> None:
    impact = commit(
        tree,
        {
            BINARY_METAL: (
                "REGISTER_FLOAT_BINARY_OP(div_true);",
                "REGISTER_INTEGER_BINARY_OP(div_true);",
            )
        },
    )
    assert ops(impact) == {"div"}
    assert "registration of div_true changed (kernel div_true run by div_true_stub)" in reasons(
        impact
    )
    # both OpInfo variants of div
    assert impact.selected == 2 * len(DTYPES)


def test_kernel_run_by_name_from_host_code_or_extended_by_an_operator(tree: Path) -> None:
    impact = commit(
        tree, {BINARY_METAL: ("::metal::log1p(::metal::exp(", "::metal::log(1 + ::metal::exp(")}
    )
    assert ops(impact) == {"logaddexp"}
    assert "(kernel lse_fast run by logaddexp_out_mps)" in reasons(impact)
    impact = commit(tree, {BINARY_METAL: ("d < 1 ? 0.5f * d * d", "d < 1.0f ? 0.5f * d * d")})
    assert ops(impact) == {"smooth_l1_loss"}
    assert "(kernel smooth_l1 taken as smooth_l1_loss)" in reasons(impact)


def test_shared_helper_fans_out_to_its_users_only(tree: Path) -> None:
    impact = commit(
        tree, {BINARY_METAL: ("return float(x) * float(x);", "return metal::pow(float(x), 2.0f);")}
    )
    assert ops(impact) == {"hypot"}
    assert "shared helper sq changed" in reasons(impact)
    impact = commit(tree, {BINARY_METAL: ("c10::metal::safe_div(a, b);", "a / b;")})
    assert ops(impact) == {"div"}


def test_metal_comments_affect_nothing(tree: Path) -> None:
    impact = commit(
        tree, {BINARY_METAL: ("spanning lines { not code } */", "spanning two lines */")}
    )
    assert impact.operators == () and not impact.full_sweep


def test_registration_macro_reaches_what_it_registers(tree: Path) -> None:
    impact = commit(
        tree,
        {
            BINARY_METAL: (
                "REGISTER_BINARY_OP(NAME, long, long)",
                "REGISTER_BINARY_OP(NAME, short, short)",
            )
        },
    )
    assert ops(impact) == {"gcd", "lcm"}
    assert "shared macro REGISTER_INTEGER_BINARY_OP changed" in reasons(impact)


def test_include_line_fans_out_to_the_whole_file(tree: Path) -> None:
    impact = commit(
        tree,
        {
            BINARY_METAL: (
                "#include <metal_stdlib>\n",
                "#include <metal_stdlib>\n#include <metal_math>\n",
            )
        },
    )
    assert ops(impact) == {"atan2", "hypot", "div", "gcd", "lcm", "logaddexp", "smooth_l1_loss"}
    assert "every operator with Metal kernels in Binary.metal" in reasons(impact)


def test_removed_functor_is_found_in_the_old_version(tree: Path) -> None:
    text = (tree / BINARY_METAL).read_text()
    start = text.index("struct lcm_functor")
    end = text.index("};\n", start) + 3
    text = text[:start] + text[end:]
    impact = commit(tree, {BINARY_METAL: text.replace("REGISTER_INTEGER_BINARY_OP(lcm);\n", "")})
    assert ops(impact) == {"lcm"}
    assert "(old) functor lcm_functor changed" in reasons(impact)


# --- headers -----------------------------------------------------------------------------


MATHISH = "c10/metal/mathish.h"
CODEGEN = "torch/_inductor/codegen/mps.py"
INDUCTOR_TESTS = (
    "test/inductor/test_mps_basic.py",
    "test/inductor/test_torchinductor.py",
    "test/inductor/test_torchinductor_dynamic_shapes.py",
    "test/inductor/test_aot_inductor.py",
)


def test_c10_metal_helper_reaches_the_functors_calling_it(tree: Path) -> None:
    # safe_div is called by Binary.metal's safe_ratio, which div_true_functor calls, and by
    # remainder in the same header, which Inductor's generated code calls
    impact = commit(tree, {MATHISH: ("a / b;\n}", "a * (T(1) / b);\n}")})
    assert ops(impact) == {"div"}
    assert "c10/metal/mathish.h:13 c10::metal::safe_div changed, called in Binary.metal" in (
        reasons(impact)
    )
    assert impact.build_needed and not impact.full_sweep
    assert impact.test_ids == tuple(
        f"TestConsistencyMPS::test_output_match_div_{v}_mps_{d}"
        for v in ("no_rounding_mode", "trunc_rounding")
        for d in DTYPES
    )
    assert impact.inductor_tests == INDUCTOR_TESTS
    assert impact.inductor_reasons == (
        "c10/metal/mathish.h: c10::metal::safe_div is called by Inductor's generated Metal "
        "code, as remainder -> safe_div (torch/_inductor/codegen/mps.py: "
        "c10::metal::remainder)",
    )


def test_c10_metal_helper_no_functor_calls_selects_inductor_alone(tree: Path) -> None:
    impact = commit(tree, {MATHISH: ("return x + x;", "return x * 2;")})
    assert impact.operators == () and not impact.full_sweep
    assert impact.test_ids == () and impact.inductor_tests == INDUCTOR_TESTS
    assert impact.inductor_reasons == (
        "c10/metal/mathish.h:7 twice changed in c10/metal/mathish.h, which Inductor's "
        "generated Metal code includes (torch/_inductor/codegen/mps.py); no call to it found "
        "by name",
    )


def test_c10_metal_helper_called_by_name_from_a_list(tree: Path) -> None:
    impact = commit(tree, {MATHISH: ("0.886226925f", "0.8862269f")})
    assert impact.operators == ()
    assert impact.inductor_reasons == (
        "c10/metal/mathish.h: c10::metal::erfinv is called by Inductor's generated Metal code "
        '(torch/_inductor/codegen/mps.py: c10::metal::{name} with "erfinv")',
    )


def test_c10_metal_change_outside_helpers_fans_out_to_every_includer(tree: Path) -> None:
    impact = commit(tree, {MATHISH: ("#pragma once", "#pragma once\n#include <metal_stdlib>")})
    assert ops(impact) == {
        "atan2", "hypot", "div", "gcd", "lcm", "erf", "logaddexp", "smooth_l1_loss",
    }  # fmt: skip
    assert impact.build_needed and not impact.full_sweep
    assert impact.inductor_tests == INDUCTOR_TESTS
    assert (
        "c10/metal/mathish.h:2 header changed outside any helper (included by Binary.metal)"
        in reasons(impact)
    )
    assert "code outside any helper changed in c10/metal/mathish.h" in impact.inductor_reasons[0]


def test_c10_metal_header_no_functor_includes_selects_inductor(tree: Path) -> None:
    impact = commit(tree, {"c10/metal/unused_ish.h": ("4294967296.0f", "4294967295.0f")})
    assert impact.operators == () and not impact.full_sweep and impact.test_ids == ()
    assert impact.inductor_tests == INDUCTOR_TESTS
    assert impact.inductor_reasons == (
        "c10/metal/unused_ish.h:6 philox_ish changed; Inductor's generated Metal code "
        "(torch/_inductor/codegen/mps.py) neither includes the header nor calls it by name, "
        "but c10::metal is shared with generated code outside the tree (Helion's Metal "
        "backend)",
        "c10/metal/unused_ish.h:6 no functor includes c10/metal/unused_ish.h: no consistency "
        "test reaches it, and Inductor's generated Metal code can",
    )
    text = render_text(impact).splitlines()
    assert text[1] == "Inductor MPS tests: " + ", ".join(INDUCTOR_TESTS)
    assert text[2:4] == [f"  - {reason}" for reason in impact.inductor_reasons]


def test_inductor_codegen_change_selects_inductor_tests(tree: Path) -> None:
    impact = commit(tree, {CODEGEN: ('["erfinv", "i0"]', '["erfinv", "i0", "i1"]')})
    assert impact.operators == () and impact.test_ids == () and not impact.build_needed
    assert impact.inductor_tests == INDUCTOR_TESTS
    assert impact.inductor_reasons == (
        "torch/_inductor/codegen/mps.py changed: Inductor's generated Metal code",
    )


def test_c10_metal_without_the_codegen_says_unknown() -> None:
    text = (FIXTURES / "impact" / "tree" / MATHISH).read_text()
    change = ChangedFile(MATHISH, "M", text, text.replace("x + x", "x * 2"), ((7, 7),), ((7, 7),))
    impact = analyze([change], opinfos=OPINFOS)
    assert impact.inductor_tests == INDUCTOR_TESTS
    assert impact.inductor_reasons == (
        "c10/metal/mathish.h:7 c10/metal/mathish.h changed; which c10::metal functions "
        "Inductor's generated Metal code calls is unknown (torch/_inductor/codegen/mps.py is "
        "not in the tree)",
        "c10/metal/mathish.h:7 no functor includes c10/metal/mathish.h: no consistency test "
        "reaches it, and Inductor's generated Metal code can",
    )


def test_kernel_header_reaches_metal_and_host_includers(tree: Path) -> None:
    impact = commit(
        tree,
        {"aten/src/ATen/native/mps/kernels/Shared.h": ("int flags;", "int flags;\n  int more;")},
    )
    assert ops(impact) == {"erf"}
    assert "Shared.h:5 header changed (included by Special.metal)" in reasons(impact)
    assert "(included by Special.mm)" in reasons(impact)


def test_header_comment_only_affects_nothing(tree: Path) -> None:
    impact = commit(tree, {"c10/metal/mathish.h": ("// Fixture stand-in", "// A stand-in")})
    assert impact.operators == () and not impact.full_sweep and not impact.build_needed
    assert impact.inductor_tests == ()


def test_header_that_does_not_lex_means_full_sweep(tree: Path) -> None:
    impact = commit(tree, {"c10/metal/mathish.h": ("// Fixture stand-in", "/* Fixture stand-in")})
    assert impact.full_sweep and impact.build_needed
    assert impact.full_sweep_reasons[0].startswith("c10/metal/mathish.h:2: unterminated /*")
    assert impact.inductor_tests == INDUCTOR_TESTS


# --- .mm host code -----------------------------------------------------------------------


def test_stub_kernel_function_and_register_line(tree: Path) -> None:
    impact = commit(
        tree,
        {
            BINARY_MM: (
                'lib.exec_binary_kernel(iter, "atan2");',
                'lib.exec_binary_kernel(iter, "atan2");\n  (void)0;',
            )
        },
    )
    assert ops(impact) == {"atan2"}
    assert "stub kernel atan2_mps_kernel changed (registered as atan2_stub)" in reasons(impact)
    impact = commit(
        tree,
        {
            BINARY_MM: (
                "REGISTER_DISPATCH(gcd_stub, &gcd_mps_kernel)",
                "REGISTER_DISPATCH(gcd_stub, gcd_mps_kernel);",
            )
        },
    )
    assert ops(impact) == {"gcd"}


def test_mpsgraph_implementation_maps_through_the_yaml(tree: Path) -> None:
    impact = commit(
        tree, {BINARY_MM: ('"logaddexp_out_mps", block);', '"logaddexp_out_mps_v2", block);')}
    )
    assert ops(impact) == {"logaddexp"}
    assert (
        "Binary.mm:52 MPSGraph implementation logaddexp_out_mps changed (MPS kernel of logaddexp)"
        in reasons(impact)
    )


def test_migration_touching_yaml_mm_and_metal_together(tree: Path) -> None:
    text = (tree / BINARY_MM).read_text()
    start = text.index("TORCH_IMPL_FUNC(logaddexp_out_mps)")
    end = text.index("}\n}", start) + 2
    mm = text[:start] + text[end:]
    mm = mm.replace("#include <ATen/ops/logaddexp_native.h>\n", "")
    impact = commit(
        tree,
        {
            BINARY_MM: mm,
            YAML: (
                "    CPU, CUDA: logaddexp_out\n    MPS: logaddexp_out_mps  # still MPSGraph\n",
                "    CPU, CUDA, MPS: logaddexp_out\n",
            ),
        },
    )
    assert ops(impact) == {"logaddexp"}
    assert not impact.full_sweep


def test_shared_host_code_means_full_sweep(tree: Path) -> None:
    impact = commit(
        tree,
        {
            BINARY_MM: (
                "return isIntegralType(iter.common_dtype(), true);",
                "return isIntegralType(iter.common_dtype(), false);",
            )
        },
    )
    assert impact.full_sweep and impact.build_needed
    assert "shared host code changed" in impact.full_sweep_reasons[0]
    assert impact.selected == impact.total == TOTAL


def test_operation_utils_means_full_sweep(tree: Path) -> None:
    impact = commit(
        tree,
        {
            "aten/src/ATen/native/mps/OperationUtils.mm": (
                "void binaryOpTensor() {}",
                "void binaryOpTensor() { return; }",
            )
        },
    )
    assert impact.full_sweep and impact.build_needed
    assert impact.full_sweep_reasons == (
        "aten/src/ATen/native/mps/OperationUtils.mm changed: shared MPS infrastructure",
    )


# --- Python: common_mps.py and OpInfo definitions ------------------------------------------


def test_common_mps_entry_change_selects_that_opinfo_without_build(tree: Path) -> None:
    impact = commit(
        tree,
        {COMMON_MPS: ('"hypot": [torch.bfloat16],', '"hypot": [torch.bfloat16, torch.float16],')},
    )
    assert ops(impact) == {"hypot"} and not impact.build_needed
    assert "ON_MPS_XFAILLIST entry 'hypot' changed" in reasons(impact)
    impact = commit(
        tree, {COMMON_MPS: ('"divtrunc_rounding": [torch.float16],  # rounding differs\n', "")}
    )
    assert ops(impact) == {"div"}
    # the key names one variant: only its tests
    assert impact.selected == len(DTYPES)
    assert all("test_output_match_div_trunc_rounding_mps_" in t for t in impact.test_ids)


def test_common_mps_comments_and_logic(tree: Path) -> None:
    impact = commit(tree, {COMMON_MPS: ("# not yet on MPS", "# not implemented on MPS yet")})
    assert impact.operators == () and not impact.full_sweep
    impact = commit(tree, {COMMON_MPS: ("op.decorators = (key,)", "op.decorators = (key, key)")})
    assert impact.full_sweep and not impact.build_needed
    assert "code outside the xfail entries changed" in impact.full_sweep_reasons[0]


def test_opinfo_definition_edit_selects_that_opinfo(tree: Path) -> None:
    impact = commit(tree, {DEFS: ('dtypes=("float32", "int32"),', 'dtypes=("float32",),')})
    assert ops(impact) == {"atan2"} and not impact.build_needed
    assert impact.selected == len(DTYPES)


def test_sample_inputs_change_reaches_the_opinfos_using_it(tree: Path) -> None:
    impact = commit(tree, {DEFS: ("yield (1, 2, rounding_mode)", "yield (2, 1, rounding_mode)")})
    assert ops(impact) == {"div"} and impact.selected == 2 * len(DTYPES)
    impact = commit(tree, {DEFS: ("return [(1, 2), (3, 4)]", "return [(1, 2)]")})
    assert ops(impact) == {"hypot"}  # _pairs -> sample_inputs_hypot -> hypot


def test_opinfo_definition_comments_and_unattributable_code(tree: Path) -> None:
    impact = commit(tree, {DEFS: ("# comment inside a definition", "# another comment")})
    assert impact.operators == () and not impact.full_sweep
    impact = commit(tree, {DEFS: ("return 42", "return 43")})
    assert impact.full_sweep and not impact.build_needed


# --- everything else -----------------------------------------------------------------------


def test_test_mps_is_a_full_sweep_without_build(tree: Path) -> None:
    impact = commit(tree, {"test/test_mps.py": "import torch\n"})
    assert impact.full_sweep and not impact.build_needed and impact.selected == TOTAL


def test_files_outside_mps_are_ignored(tree: Path) -> None:
    impact = commit(
        tree, {"docs/source/mps.rst": "MPS\n===\n", "aten/src/ATen/native/cuda/X.cu": "//\n"}
    )
    assert impact.ignored == ("aten/src/ATen/native/cuda/X.cu", "docs/source/mps.rst")
    assert impact.operators == () and impact.selected == 0 and not impact.build_needed
    assert impact.fraction == 0.0
