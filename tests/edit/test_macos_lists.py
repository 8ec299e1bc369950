"""Moving xfails into macOS-version lists: on the sandbox's common_mps.py (which has only
MACOS_BEFORE_14_4_XFAILLIST) and on the released wheels' (OLDEST and NEWEST)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.edit.macos_lists import XfailAddition, applies_list, apply_xfail_moves
from pipeline.edit.xfails import XfailChange
from pipeline.errors import EditVerificationError
from pipeline.guide import xfails as xfail_plan
from pipeline.results.decide import XfailAction, XfailDecision
from pipeline.tree import common_mps, paths
from tests.conftest import per_release

REL = paths.COMMON_MPS
MOD, GRAD = "mps_ops_modifier", "mps_ops_grad_modifier"
NEW, NEW_GRAD = "MACOS_BEFORE_15_0_XFAILLIST", "MACOS_BEFORE_15_0_XFAILLIST_GRAD"


@pytest.fixture(scope="module")
def text() -> str:
    return (sandbox.TREE / REL).read_text()


def delete(list_name: str, key: str, function: str = MOD) -> XfailChange:
    return XfailChange(list_name, function, key, None, delete=True)


def entries(edited: str, list_name: str, function: str = MOD) -> dict:
    model = common_mps.parse(edited, REL)
    return {e.key: e.dtypes for e in model.entries if (e.list, e.function) == (list_name, function)}


def block(source: str, first_line: str) -> list[str]:
    """The lines of the ``if`` statement starting with ``first_line`` (up to a blank line)."""
    lines = source.splitlines()
    start = lines.index(first_line)
    end = lines.index("", start)
    return lines[start:end]


def test_a_new_list_is_created_and_applied_like_the_existing_one(text) -> None:
    edit = apply_xfail_moves(
        text,
        REL,
        [delete("UNDEFINED_XFAILLIST", "xlogy")],
        [XfailAddition(NEW, MOD, "xlogy", ("bool",))],
    )
    after = edit.after
    assert entries(after, NEW) == {"xlogy": ("bool",)}
    assert "xlogy" not in entries(after, "UNDEFINED_XFAILLIST")
    # the other lists are as they were
    assert entries(after, "MACOS_BEFORE_14_4_XFAILLIST") == {"maximum": ("bfloat16",)}
    assert entries(after, "UNIMPLEMENTED_XFAILLIST") == entries(text, "UNIMPLEMENTED_XFAILLIST")
    # declared right after MACOS_BEFORE_14_4_XFAILLIST...
    assert (
        '            "maximum": [torch.bfloat16],\n'
        "        }\n"
        "\n"
        "        MACOS_BEFORE_15_0_XFAILLIST = {\n"
        "            # These ops fail before macOS 15.0 and work from it on\n"
        '            "xlogy": [torch.bool],\n'
        "        }\n"
        "\n"
        "        # Those ops are not expected to work\n"
    ) in after
    # ...and applied by a copy of its block, right after it: the same condition on
    # MACOS_VERSION, the same addDecorator call
    old = block(text, "            if (")
    new = block(after.split("MACOS_VERSION < 14.4")[1], "            if (")
    assert new == [
        line.replace("MACOS_BEFORE_14_4", "MACOS_BEFORE_15_0").replace("14.4", "15.0")
        for line in old
    ]
    assert "                and (MACOS_VERSION < 15.0)" in new
    assert applies_list(after, MOD, NEW) and not applies_list(text, MOD, NEW)
    compile(after, REL, "exec")
    # only lines were inserted, besides the removed entry
    removed = [line for line in edit.diff().splitlines()[2:] if line.startswith("-")]
    assert removed == ['-            "xlogy": [torch.bool],']
    assert edit.summary == (
        "drop xlogy in UNDEFINED_XFAILLIST; create MACOS_BEFORE_15_0_XFAILLIST: xlogy bool"
    )


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_the_grad_modifier_gets_a_grad_list_in_the_same_shape(text) -> None:
    """mps_ops_grad_modifier has no macOS list to copy: the block is written out, without
    xfail_exclusion (not an argument there), after the loop's last xfail block."""
    edit = apply_xfail_moves(
        text,
        REL,
        [delete("XFAILLIST_GRAD", "fmod", GRAD)],
        [XfailAddition(NEW_GRAD, GRAD, "fmod", ("float16",))],
    )
    after = edit.after
    assert entries(after, NEW_GRAD, GRAD) == {"fmod": ("float16",)}
    assert "fmod" not in entries(after, "XFAILLIST_GRAD", GRAD)
    assert entries(after, NEW_GRAD) == {}  # not in mps_ops_modifier
    assert (
        "            if key in MACOS_BEFORE_15_0_XFAILLIST_GRAD and (MACOS_VERSION < 15.0):\n"
        "                addDecorator(\n"
        "                    op,\n"
        "                    DecorateInfo(\n"
        "                        unittest.expectedFailure,\n"
        "                        dtypes=MACOS_BEFORE_15_0_XFAILLIST_GRAD[key],\n"
        "                    ),\n"
        "                )\n"
        "\n"
        "        return ops\n"
    ) in after
    # declared after the grad modifier's first xfail list, XFAILLIST_GRAD
    assert after.index("MACOS_BEFORE_15_0_XFAILLIST_GRAD = {") < after.index("SKIPLIST_GRAD = {")
    assert applies_list(after, GRAD, NEW_GRAD)
    compile(after, REL, "exec")


def test_an_existing_list_gains_the_key_or_the_dtypes(text) -> None:
    old = "MACOS_BEFORE_14_4_XFAILLIST"
    edit = apply_xfail_moves(
        text,
        REL,
        [delete("UNIMPLEMENTED_XFAILLIST", "hypot")],
        [
            XfailAddition(old, MOD, "hypot", ("float32", "float16")),
            XfailAddition(old, MOD, "maximum", ("float16",)),
        ],
    )
    assert entries(edit.after, old) == {
        "maximum": ("bfloat16", "float16"),
        "hypot": ("float32", "float16"),
    }
    assert (
        "            # bfloat16 maximum drops NaN propagation on 14.2 and earlier\n"
        '            "maximum": [torch.bfloat16, torch.float16],\n'
        '            "hypot": [torch.float32, torch.float16],\n'
        "        }\n"
    ) in edit.after
    assert edit.after.count("MACOS_BEFORE_14_4_XFAILLIST = {") == 1
    assert edit.after.count("MACOS_VERSION <") == 1  # no second applying block


def test_keys_go_into_dicts_of_other_layouts() -> None:
    source = (
        "from .common_utils import MACOS_VERSION\n"
        "def mps_ops_modifier(ops, device_type='mps', xfail_exclusion=None):\n"
        "    UNIMPLEMENTED_XFAILLIST = {'atan2': None, 'hypot': None}\n"
        "    MACOS_BEFORE_15_0_XFAILLIST = {}\n"
        "    MACOS_BEFORE_26_0_XFAILLIST = {\n"
        "        'fmod': None  # no trailing comma\n"
        "    }\n"
        "    for op in ops:\n"
        "        key = op.name + op.variant_test_name\n"
        "        if key in MACOS_BEFORE_15_0_XFAILLIST and (MACOS_VERSION < 15.0):\n"
        "            addDecorator(op, DecorateInfo(dtypes=MACOS_BEFORE_15_0_XFAILLIST[key]))\n"
        "    return ops\n"
    )
    edit = apply_xfail_moves(
        source,
        REL,
        [delete("UNIMPLEMENTED_XFAILLIST", "atan2")],
        [
            XfailAddition(NEW, MOD, "atan2", ("int64",)),
            XfailAddition("MACOS_BEFORE_26_0_XFAILLIST", MOD, "atan2", ("int32",)),
        ],
    )
    assert '    MACOS_BEFORE_15_0_XFAILLIST = {\n        "atan2": [torch.int64],\n    }\n' in (
        edit.after
    )
    assert "        'fmod': None,  # no trailing comma\n" in edit.after
    assert entries(edit.after, "MACOS_BEFORE_26_0_XFAILLIST") == {
        "fmod": None,
        "atan2": ("int32",),
    }
    # a one-line dict that still has entries cannot take one more line
    one_line = source.replace("{}", "{'x': None, 'y': None}")
    with pytest.raises(EditVerificationError, match="does not sit on its own line"):
        apply_xfail_moves(one_line, REL, [], [XfailAddition(NEW, MOD, "z", ("int8",))])


def test_what_cannot_be_made_is_refused(text) -> None:
    with pytest.raises(ValueError, match="not a list named like"):
        XfailAddition("UNIMPLEMENTED_XFAILLIST", MOD, "x", ("int8",))
    with pytest.raises(ValueError, match="not a canonical dtype"):
        XfailAddition(NEW, MOD, "x", ("half",))
    no_version = text.replace("from .common_utils import MACOS_VERSION\n", "")
    with pytest.raises(EditVerificationError, match="MACOS_VERSION is not imported"):
        apply_xfail_moves(no_version, REL, [], [XfailAddition(NEW, MOD, "xlogy", ("bool",))])
    # what the results decided wrongly is caught by the verification (the key is not there)
    with pytest.raises(EditVerificationError, match="no entry 'nope'"):
        apply_xfail_moves(
            text,
            REL,
            [delete("UNDEFINED_XFAILLIST", "nope")],
            [XfailAddition(NEW, MOD, "n", ("bool",))],
        )


def test_crlf_files_keep_their_line_endings(text) -> None:
    crlf = text.replace("\n", "\r\n")
    edit = apply_xfail_moves(
        crlf,
        REL,
        [delete("UNDEFINED_XFAILLIST", "xlogy")],
        [XfailAddition(NEW, MOD, "xlogy", ("bool",))],
    )
    assert "\n" not in edit.after.replace("\r\n", "")
    assert entries(edit.after, NEW) == {"xlogy": ("bool",)}


def test_a_removal_and_a_move_of_one_entry_make_one_edit(sandbox_tree) -> None:
    """atan2 loses int64 (xpassed everywhere) and int32 (xpassed on macOS 15 and later)."""
    atan2 = ("int64", "int32", "int16", "int8", "uint8", "bool")
    remove = XfailDecision(
        "UNIMPLEMENTED_XFAILLIST", MOD, "atan2", XfailAction.DROP_DTYPES, atan2,
        atan2[1:], "xpass everywhere", ("int64",),
    )  # fmt: skip
    move = XfailDecision(
        "UNIMPLEMENTED_XFAILLIST", MOD, "atan2", XfailAction.MOVE, atan2,
        (atan2[0], *atan2[2:]), "xfail on 14 only", ("int32",), to_list=NEW,
    )  # fmt: skip
    before = (sandbox_tree / REL).read_text()
    edit = xfail_plan.proposal_edit(sandbox_tree, [remove, move])
    assert edit is not None and (sandbox_tree / REL).read_text() == before  # not applied
    assert entries(edit.after, "UNIMPLEMENTED_XFAILLIST")["atan2"] == atan2[2:]
    assert entries(edit.after, NEW) == {"atan2": ("int32",)}
    assert xfail_plan.proposal_edit(sandbox_tree, []) is None


# --- the wheel's common_mps.py -----------------------------------------------------------------


def _ruff() -> str | None:
    candidate = Path(sys.executable).parent / "ruff"
    return str(candidate) if candidate.exists() else shutil.which("ruff")


# The keys the grad function's MACOS_BEFORE_15_0_XFAILLIST_GRAD holds in each release (2.15
# declares it; 2.13 has no such list, nor one of the forward function's)
GRAD_LIST_BEFORE = {"2.13.0": None, "2.15.0": ("matrix_exp",)}


@pytest.mark.slow
@pytest.mark.realdata
def test_moves_in_the_real_file_compile_and_read_back(
    real_common_mps, real_release, tmp_path
) -> None:
    root = tmp_path / "pytorch"
    (root / REL).parent.mkdir(parents=True)
    shutil.copy(real_common_mps, root / REL)
    text = (root / REL).read_text()
    model = common_mps.parse(text, REL)
    (glu_entry,) = [e for e in model.entries if e.key == "nn.functional.glu"]
    (msort,) = [e for e in model.entries if e.key == "msort" and e.function == GRAD]
    grad_list = per_release(GRAD_LIST_BEFORE, real_release)
    declared = {d.list for d in model.dicts}
    assert NEW not in declared
    if grad_list is None:
        assert NEW_GRAD not in declared
    else:  # the move adds to the list the file has, never declares a second one
        assert tuple(e.key for e in model.entries if e.list == NEW_GRAD) == grad_list
    decisions = [
        XfailDecision(
            glu_entry.list, MOD, glu_entry.key, XfailAction.MOVE, glu_entry.dtypes,
            tuple(d for d in glu_entry.dtypes or () if d != "int16"), "r", ("int16",),
            to_list=NEW,
        ),
        XfailDecision(msort.list, GRAD, "msort", XfailAction.MOVE, msort.dtypes, (), "r",
                      ("float16",), to_list=NEW_GRAD),
    ]  # fmt: skip
    edit = xfail_plan.proposal_edit(root, decisions)
    assert edit is not None
    compile(edit.after, REL, "exec")  # the created lists and their applying code compile
    after = common_mps.parse(edit.after, REL)
    found = {(e.list, e.function, e.key): e.dtypes for e in after.entries}
    assert found[(NEW, MOD, "nn.functional.glu")] == ("int16",)
    assert found[(NEW_GRAD, GRAD, "msort")] == ("float16",)
    assert [e.key for e in after.entries if e.list == NEW_GRAD] == [*(grad_list or ()), "msort"]
    assert [d.list for d in after.dicts].count(NEW_GRAD) == 1
    assert "int16" not in found[("UNIMPLEMENTED_XFAILLIST", MOD, "nn.functional.glu")]
    assert ("XFAILLIST_GRAD", GRAD, "msort") not in found
    # glu keeps its other dtypes where they were and gains an entry; msort moved whole
    assert len(after.entries) == len(model.entries) + 1
    assert applies_list(edit.after, MOD, NEW) and applies_list(edit.after, GRAD, NEW_GRAD)
    # modelled on MACOS_BEFORE_14_4_XFAILLIST's block (2.15 has none): the same condition form
    assert (
        "                key in MACOS_BEFORE_15_0_XFAILLIST\n"
        "                and key not in xfail_exclusion\n"
        "                and (MACOS_VERSION < 15.0)\n"
    ) in edit.after
    # the file was formatted (ruff/black, 88 columns) and still is
    ruff = _ruff()
    if ruff is not None:
        out = tmp_path / "edited.py"
        out.write_text(edit.after)
        check = [ruff, "format", "--isolated", "--line-length", "88", "--check", str(out)]
        before = subprocess.run([*check[:-1], str(root / REL)], capture_output=True, text=True)
        after_check = subprocess.run(check, capture_output=True, text=True)
        if before.returncode == 0:
            assert after_check.returncode == 0, after_check.stdout + after_check.stderr
