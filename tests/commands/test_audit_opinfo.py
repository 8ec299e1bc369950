"""`audit` and `backlog` find an operator's OpInfos as op_db spells them, and say when none is
found (issue 27): never "0 tests" with "no xfail entries" passed.

The tree is the sandbox with three operators added, shaped like torch's own:
- ``special_bessel_j0``, whose OpInfo op_db names ``special.bessel_j0`` with the same dotted
  aten_name (op_db's default), and whose common_mps.py entry is keyed by that name;
- ``celu``, without MPS, whose OpInfo is ``nn.functional.celu`` (the ``add`` workflow);
- ``special_airy_ai``, with an MPS row and no OpInfo at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.__main__ import main
from pipeline.tree import paths
from pipeline.tree.index import NO_OPINFO

YAML = """
- func: special_bessel_j0(Tensor self) -> Tensor
  python_module: special
  structured_delegate: special_bessel_j0.out
  variants: function
  tags: pointwise

- func: special_bessel_j0.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  python_module: special
  structured: True
  structured_inherits: TensorIteratorBase
  dispatch:
    CPU, CUDA: special_bessel_j0_out
    MPS: special_bessel_j0_out_mps
  tags: pointwise

- func: special_airy_ai(Tensor x) -> Tensor
  python_module: special
  structured_delegate: special_airy_ai.out
  variants: function
  tags: pointwise

- func: special_airy_ai.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)
  python_module: special
  structured: True
  structured_inherits: TensorIteratorBase
  dispatch:
    CPU, CUDA: special_airy_ai_out
    MPS: special_airy_ai_out_mps
  tags: pointwise

- func: celu(Tensor self, Scalar alpha=1.0) -> Tensor
  python_module: nn
  dispatch:
    CPU, CUDA: celu
  tags: pointwise
"""

OPINFOS = """
- name: special.bessel_j0
  aten_name: special.bessel_j0
  dtypes: [float32, float16, int64]

- name: nn.functional.celu
  aten_name: nn.functional.celu
  dtypes: [float32, float16]
"""


@pytest.fixture
def tree(sandbox_tree: Path) -> Path:
    with (sandbox_tree / paths.NATIVE_YAML).open("a") as fh:
        fh.write(YAML)
    with (sandbox_tree / paths.OPINFO_TABLE).open("a") as fh:
        fh.write(OPINFOS)
    _add_entry(sandbox_tree, '"special.bessel_j0": [torch.float16],')
    return sandbox_tree


def _add_entry(root: Path, line: str) -> None:
    """``line`` as the first entry of UNIMPLEMENTED_XFAILLIST."""
    path = root / paths.COMMON_MPS
    opening = "UNIMPLEMENTED_XFAILLIST: dict[str, list | None] = {\n"
    text = path.read_text()
    assert opening in text
    path.write_text(text.replace(opening, f"{opening}            {line}\n", 1))


def _cli(capsys, root: Path, *argv: str) -> tuple[int, str]:
    code = main(
        [*argv, "--root", str(root), "--state-dir", str(root.parent / "state")]
        + ["--opinfo-table", str(root / paths.OPINFO_TABLE)]
    )
    return code, capsys.readouterr().out


def _checks(doc: dict) -> dict[str, dict]:
    return {c["id"]: c for c in doc["checklist"]}


def test_a_dotted_aten_name_finds_its_tests_and_its_entry(capsys, tree: Path) -> None:
    code, out = _cli(capsys, tree, "audit", "special_bessel_j0", "--json")
    doc = json.loads(out)
    assert code == 1
    assert [i["name"] for i in doc["opinfos"]] == ["special.bessel_j0"]
    assert "TestConsistencyMPS::test_output_match_special_bessel_j0_mps_float16" in doc["tests"]
    assert [(e["list"], e["key"], e["dtypes"]) for e in doc["xfails"]] == [
        ("UNIMPLEMENTED_XFAILLIST", "special.bessel_j0", ["float16"])
    ]
    checks = _checks(doc)
    assert checks["xfails"]["status"] == "fail"  # the entry is there: work left
    assert checks["decorators"]["status"] == "pass"
    # op_db's name resolves to the yaml's operator
    _, out = _cli(capsys, tree, "audit", "special.bessel_j0", "--json")
    assert json.loads(out)["op"] == "special_bessel_j0"

    _, out = _cli(capsys, tree, "audit", "special_bessel_j0")
    assert "consistency tests: 3" in out
    assert "✗ no xfail/skip entries in common_mps.py" in out
    assert "UNIMPLEMENTED_XFAILLIST['special.bessel_j0']: float16" in out


def test_no_opinfo_found_is_unknown_in_audit_never_a_pass(capsys, tree: Path) -> None:
    code, out = _cli(capsys, tree, "audit", "special_airy_ai")
    assert code == 1
    assert "consistency tests: unknown" in out and "consistency tests: 0" not in out
    assert " ? no xfail/skip entries in common_mps.py" in out
    assert "✓ no xfail" not in out and "✓ no MPS skip/xfail decorators" not in out
    assert NO_OPINFO in out

    code, out = _cli(capsys, tree, "audit", "special_airy_ai", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["opinfos"] == [] and doc["tests"] == []
    checks = _checks(doc)
    for item in ("xfails", "decorators"):
        assert checks[item]["status"] == "unknown" and not checks[item]["ok"]
        assert {"text": f"unknown: {NO_OPINFO}"} in checks[item]["details"]
    # nothing registered is a failure whatever the OpInfos say
    assert checks["dtypes"]["status"] == "fail"


def test_an_entry_keyed_by_the_dotted_name_is_found_without_an_opinfo(capsys, tree: Path) -> None:
    _add_entry(tree, '"special.airy_ai": None,')
    _, out = _cli(capsys, tree, "audit", "special_airy_ai", "--json")
    checks = _checks(json.loads(out))
    assert checks["xfails"]["status"] == "fail"  # evidence stands without an OpInfo
    assert checks["xfails"]["details"][0]["text"] == (
        "UNIMPLEMENTED_XFAILLIST['special.airy_ai']: all dtypes"
    )
    assert checks["decorators"]["status"] == "unknown"


def test_backlog_lists_them_and_says_which_are_unknown(capsys, tree: Path) -> None:
    code, out = _cli(capsys, tree, "backlog", "--json")
    assert code == 0
    items = {i["op"]: i for i in json.loads(out)["items"]}
    bessel, airy = items["special_bessel_j0"], items["special_airy_ai"]
    assert bessel["has_opinfo"] and bessel["xfail_dtypes"] == 1
    assert not airy["has_opinfo"] and airy["workflow"] == "migrate"
    # an `add` operator is listed once its OpInfo is found by op_db's name
    assert items["celu"]["workflow"] == "add" and items["celu"]["has_opinfo"]
    order = list(items)
    assert order.index("special_bessel_j0") < order.index("special_airy_ai")  # unknown after

    _, out = _cli(capsys, tree, "backlog")
    row = next(line for line in out.splitlines() if "special_airy_ai" in line)
    assert "? no OpInfo found" in row
    assert "1 without an OpInfo found: their tests and xfails are unknown" in out
