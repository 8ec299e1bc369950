"""The xfail editor: exact, format-preserving, verified; on our fixture and the wheel's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.edit import xfails
from pipeline.edit.xfails import XfailChange, apply_xfail_changes
from pipeline.errors import EditVerificationError
from pipeline.tree import common_mps

FIXTURES = Path(__file__).parent.parent / "fixtures" / "common_mps"
REL = "torch/testing/_internal/common_mps.py"
MOD = "mps_ops_modifier"
GRAD = "mps_ops_grad_modifier"


@pytest.fixture(scope="module")
def text() -> str:
    return (FIXTURES / "common_mps.py").read_text()


def changed_lines(edit) -> tuple[list[str], list[str]]:
    """(removed, added) lines of the edit's diff, without the +/- marker."""
    lines = edit.diff().splitlines()[2:]
    removed = [line[1:] for line in lines if line.startswith("-")]
    added = [line[1:] for line in lines if line.startswith("+")]
    return removed, added


def delete(list_name, key, function=MOD):
    return XfailChange(list_name, function, key, None, delete=True)


def narrow(list_name, key, dtypes, function=MOD):
    return XfailChange(list_name, function, key, dtypes)


def test_narrow_multiline_list_removes_one_line(text):
    change = narrow(
        "UNIMPLEMENTED_XFAILLIST", "nn.functional.interpolatearea", ("uint8", "float16")
    )
    edit = apply_xfail_changes(text, REL, [change])
    assert changed_lines(edit) == (["                torch.int8,"], [])
    assert "narrow nn.functional.interpolatearea" in edit.summary
    after = common_mps.parse(edit.after, REL)
    assert after.for_key("nn.functional.interpolatearea")[0].dtypes == ("uint8", "float16")


def test_narrow_keeps_alias_spelling_and_trailing_comment(text):
    change = narrow("UNIMPLEMENTED_XFAILLIST", "atan2", ("float16", "bfloat16"))
    removed, added = changed_lines(apply_xfail_changes(text, REL, [change]))
    assert removed == [
        '            "atan2": [torch.int64, torch.half, torch.bfloat16],  # no integer kernel yet'
    ]
    assert added == ['            "atan2": [torch.half, torch.bfloat16],  # no integer kernel yet']


def test_narrow_drops_a_dtype_with_its_inline_comment(text):
    change = narrow("UNIMPLEMENTED_XFAILLIST", "logcumsumexp", ("bfloat16",))
    assert changed_lines(apply_xfail_changes(text, REL, [change])) == (
        ["                torch.float16,  # overflow"],
        [],
    )


def test_none_becomes_an_explicit_list_in_the_files_style(text):
    change = narrow("UNIMPLEMENTED_XFAILLIST", "geqrf", ("int64", "float16"))
    removed, added = changed_lines(apply_xfail_changes(text, REL, [change]))
    assert removed == ['            "geqrf": None,']
    # sort_key order; float16 is spelt torch.float16 most often in this file
    assert added == ['            "geqrf": [torch.float16, torch.int64],']


def test_alias_style_of_the_file_is_used_for_new_lists():
    text = 'X = {\n    "a": [torch.half, torch.long],\n    "b": None,\n}\n'
    edit = apply_xfail_changes(text, "c.py", [narrow("X", "b", ("float16", "int64", "bool"), "")])
    assert changed_lines(edit)[1] == ['    "b": [torch.half, torch.long, torch.bool],']


def test_long_new_list_is_one_dtype_per_line(text):
    nine = ("float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
    edit = apply_xfail_changes(text, REL, [narrow("UNIMPLEMENTED_XFAILLIST", "frexp", nine)])
    removed, added = changed_lines(edit)
    assert removed == ['            "frexp": None,']
    assert added[0] == '            "frexp": ['
    assert added[1] == "                torch.float32,"
    assert added[-1] == "            ],"
    assert len(added) == 11


def test_tuple_value_stays_a_tuple():
    text = 'X = {\n    "g": (torch.half, torch.float32),\n}\n'
    edit = apply_xfail_changes(text, "c.py", [narrow("X", "g", ("float16",), "")])
    assert changed_lines(edit)[1] == ['    "g": (torch.half,),']
    assert common_mps.parse(edit.after, "c.py").entries[0].dtypes == ("float16",)


def test_delete_takes_own_comment_when_it_ends_the_group(text):
    edit = apply_xfail_changes(text, REL, [delete("UNDEFINED_XFAILLIST", "copysign")])
    assert changed_lines(edit) == (
        [
            "            # CPU gives a different NaN sign",
            '            "copysign": [torch.float16],',
        ],
        [],
    )


def test_delete_keeps_a_heading_comment_for_the_rest_of_its_group(text):
    edit = apply_xfail_changes(
        text, REL, [delete("UNIMPLEMENTED_XFAILLIST", "nn.functional.avg_pool1d")]
    )
    assert changed_lines(edit) == (
        ['            "nn.functional.avg_pool1d": [torch.int16, torch.int32],'],
        [],
    )
    pool2d = common_mps.parse(edit.after, REL).for_key("nn.functional.avg_pool2d")[0]
    assert pool2d.comment_span is not None  # the heading now sits above the survivor


def test_delete_a_whole_group_takes_its_heading(text):
    edit = apply_xfail_changes(
        text,
        REL,
        [
            delete("UNIMPLEMENTED_XFAILLIST", "nn.functional.avg_pool1d"),
            delete("UNIMPLEMENTED_XFAILLIST", "nn.functional.avg_pool2d"),
        ],
    )
    removed, added = changed_lines(edit)
    assert removed[:2] == ["            # Integer pooling", "            # is not wired up"]
    assert len(removed) == 4 and added == []


def test_delete_keeps_the_next_entrys_comments_and_trailing_comment_goes(text):
    edit = apply_xfail_changes(
        text,
        REL,
        [
            delete("UNIMPLEMENTED_XFAILLIST", "nn.functional.interpolatearea"),
            delete("UNIMPLEMENTED_XFAILLIST", "atan2"),
        ],
    )
    removed, added = changed_lines(edit)
    assert removed[0].endswith("# no integer kernel yet")
    assert len(removed) == 6 and added == []
    assert "# Integer pooling" in edit.after and '# "kthvalue": None,' in edit.after


def test_delete_last_entry_without_trailing_comma(text):
    edit = apply_xfail_changes(text, REL, [delete("SKIPLIST", "argsort")])
    removed, added = changed_lines(edit)
    assert removed == [
        '            "nn.functional.conv3d": None,',
        '            "argsort": [torch.float16]',
    ]
    assert added == ['            "nn.functional.conv3d": None']


def test_delete_in_a_one_line_dict(text):
    first = apply_xfail_changes(text, REL, [delete("ON_MPS_XFAILLIST", "hypot")])
    assert changed_lines(first)[1] == ['        ON_MPS_XFAILLIST = {"nextafter": None}']
    last = apply_xfail_changes(text, REL, [delete("ON_MPS_XFAILLIST", "nextafter")])
    assert changed_lines(last)[1] == ['        ON_MPS_XFAILLIST = {"hypot": [torch.bfloat16]}']


def test_delete_the_only_entry_leaves_a_valid_empty_dict(text):
    edit = apply_xfail_changes(text, REL, [delete("MACOS_BEFORE_14_4_XFAILLIST", "fft.ihfft2")])
    assert "        MACOS_BEFORE_14_4_XFAILLIST = {\n        }\n" in edit.after
    assert not common_mps.parse(edit.after, REL).for_key("fft.ihfft2")


def test_function_tells_same_named_lists_apart(text):
    edit = apply_xfail_changes(text, REL, [delete("ON_MPS_XFAILLIST", "hypot", GRAD)])
    after = common_mps.parse(edit.after, REL)
    assert [(e.function, e.dtypes) for e in after.for_key("hypot")] == [(MOD, ("bfloat16",))]


def test_no_op_change_leaves_the_file_alone(text):
    edit = apply_xfail_changes(text, REL, [narrow("SKIPLIST", "argsort", ("float16",))])
    assert not edit.changed


def test_refusals(text):
    with pytest.raises(EditVerificationError, match="no entry 'nope'"):
        apply_xfail_changes(text, REL, [delete("SKIPLIST", "nope")])
    with pytest.raises(EditVerificationError, match="conflicting"):
        apply_xfail_changes(
            text, REL, [delete("SKIPLIST", "argsort"), narrow("SKIPLIST", "argsort", ("bool",))]
        )
    with pytest.raises(ValueError, match="delete=True"):
        narrow("SKIPLIST", "argsort", ())
    with pytest.raises(ValueError, match="not a canonical dtype"):
        narrow("SKIPLIST", "argsort", ("half",))


def test_unevaluated_values_can_go_but_are_never_rewritten():
    odd = (FIXTURES / "odd_forms.py").read_text()
    with pytest.raises(EditVerificationError, match="change it by hand"):
        apply_xfail_changes(odd, "odd.py", [narrow("MPS_EXTRA", "dot", ("int64",), "")])
    edit = apply_xfail_changes(odd, "odd.py", [delete("MPS_EXTRA", "dot", "")])
    assert changed_lines(edit)[0] == ['    "dot": [torch.int64] if MACOS_VERSION < 14.0 else [],']


def test_verification_rejects_an_edit_that_touches_other_entries(text, monkeypatch):
    original = xfails._remove_elements

    def sloppy(elements, opening, closing, drops):
        drops = {**drops, max(drops) + 1: 0} if max(drops) + 1 < len(elements) else drops
        return original(elements, opening, closing, drops)

    monkeypatch.setattr(xfails, "_remove_elements", sloppy)
    with pytest.raises(EditVerificationError, match="nothing was written"):
        apply_xfail_changes(text, REL, [delete("UNIMPLEMENTED_XFAILLIST", "geqrf")])


def test_verification_rejects_a_shared_dict_literal():
    text = 'A = B = {"x": None, "y": None}\n'
    with pytest.raises(EditVerificationError, match="expected 3 entries"):
        apply_xfail_changes(text, "c.py", [delete("A", "x", "")])


@pytest.mark.realdata
def test_real_file_edit_touches_only_the_intended_lines(real_common_mps):
    text = real_common_mps.read_text()
    changes = [
        # drop int32 from a multi-line list
        narrow("UNIMPLEMENTED_XFAILLIST", "native_batch_norm", ("uint8", "bool", "int8", "int16")),
        # delete a key that carries a trailing comment
        delete("UNDEFINED_XFAILLIST", "as_stridedpartial_views"),
    ]
    edit = apply_xfail_changes(text, REL, changes)
    removed, added = changed_lines(edit)
    assert removed == [
        "                torch.int32,",
        '            "as_stridedpartial_views": None,  # cpu result off, showing random values',
    ]
    assert added == []
    before = common_mps.parse(text, REL)
    after = common_mps.parse(edit.after, REL)
    assert len(after.entries) == len(before.entries) - 1
    assert [(s.list, s.key) for s in after.sets] == [(s.list, s.key) for s in before.sets]


@pytest.mark.realdata
def test_real_file_delete_keeps_section_heading(real_common_mps):
    text = real_common_mps.read_text()
    edit = apply_xfail_changes(text, REL, [delete("UNDEFINED_XFAILLIST", "addr")])
    removed, added = changed_lines(edit)
    assert removed[0] == '            "addr": ['
    assert removed[-1].endswith("# \"addmv_impl_cpu\" not implemented for 'Half'")
    assert len(removed) == 8 and added == []
    assert '            # CPU Errors:\n            "as_stridedpartial_views"' in edit.after
