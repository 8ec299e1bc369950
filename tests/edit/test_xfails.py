"""The xfail editor: exact, format-preserving, verified; on our fixture and the wheel's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.edit import xfails
from pipeline.edit.xfails import XfailChange, apply_xfail_changes
from pipeline.errors import EditVerificationError
from pipeline.tree import common_mps
from tests.conftest import per_release

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
    original = xfails.remove_elements

    def sloppy(elements, opening, closing, drops):
        drops = {**drops, max(drops) + 1: 0} if max(drops) + 1 < len(elements) else drops
        return original(elements, opening, closing, drops)

    monkeypatch.setattr(xfails, "remove_elements", sloppy)
    with pytest.raises(EditVerificationError, match="nothing was written"):
        apply_xfail_changes(text, REL, [delete("UNIMPLEMENTED_XFAILLIST", "geqrf")])


def test_verification_rejects_a_shared_dict_literal():
    text = 'A = B = {"x": None, "y": None}\n'
    with pytest.raises(EditVerificationError, match="expected 3 entries"):
        apply_xfail_changes(text, "c.py", [delete("A", "x", "")])


@pytest.mark.slow
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


# --- the comments that go with a deleted entry (comments.py: the wheel's layouts) ----------


@pytest.fixture(scope="module")
def commented() -> str:
    return (FIXTURES / "comments.py").read_text()


def entries(model) -> list[tuple]:
    return [(e.list, e.function, e.key, e.dtypes) for e in model.entries]


def heading(entry, model, lines: list[str]) -> list[str]:
    """The comment lines that head ``entry``'s group, found by reading upwards over the
    entries of its dict and commented-out entries to the first comment block."""
    start_of = {
        line: e.span.start
        for e in model.entries
        if (e.list, e.function) == (entry.list, entry.function)
        for line in range(e.span.start, e.span.end + 1)
    }
    number = entry.span.start - 1
    while number >= 1:
        line = lines[number - 1].strip()
        if number in start_of:
            number = start_of[number] - 1
        elif common_mps.is_disabled_entry(line):
            number -= 1
        elif line.startswith("#"):
            block = []
            while number >= 1 and lines[number - 1].strip().startswith("#"):
                if common_mps.is_disabled_entry(lines[number - 1]):
                    break
                block.insert(0, lines[number - 1].strip())
                number -= 1
            return block
        else:
            return []
    return []


def assert_only_deleted(before_text: str, edit, deleted: set[tuple[str, str]]) -> None:
    """The result re-parses; exactly ``deleted`` (list, key) are gone; every survivor keeps
    its value and the comment lines that headed it."""
    before = common_mps.parse(before_text, REL)
    after = common_mps.parse(edit.after, REL)
    survivors = [e for e in before.entries if (e.list, e.key) not in deleted]
    assert entries(after) == [(e.list, e.function, e.key, e.dtypes) for e in survivors]
    old_lines, new_lines = before_text.splitlines(), edit.after.splitlines()
    for old, new in zip(survivors, after.entries, strict=True):
        assert heading(new, after, new_lines) == heading(old, before, old_lines), old.key


def test_a_comment_above_one_entry_goes_with_it(commented):
    change = delete("UNIMPLEMENTED_XFAILLIST", "grid_sampler_3d", "mps_ops_modifier")
    edit = apply_xfail_changes(commented, REL, [change])
    assert changed_lines(edit) == (
        [
            "        # The sampler reads past the end of the input",
            "        # when the grid leaves the image.",
            '        "grid_sampler_3d": [torch.float16],',
        ],
        [],
    )
    assert_only_deleted(commented, edit, {("UNIMPLEMENTED_XFAILLIST", "grid_sampler_3d")})


def test_a_lone_comment_goes_with_a_multiline_entry_and_its_element_comments(commented):
    edit = apply_xfail_changes(commented, REL, [delete("UNIMPLEMENTED_XFAILLIST", "round")])
    removed, added = changed_lines(edit)
    assert removed[0] == "        # CPU rounds half to even, MPS rounds half up"
    assert removed[2] == "            torch.float16,  # ties only"
    assert len(removed) == 5 and added == []
    assert_only_deleted(commented, edit, {("UNIMPLEMENTED_XFAILLIST", "round")})


def test_a_group_heading_stays_when_one_of_its_entries_goes(commented):
    for key, survivor in (("cholesky_inverse", "ormqr"), ("addbmm", "baddbmm")):
        edit = apply_xfail_changes(commented, REL, [delete("UNIMPLEMENTED_XFAILLIST", key)])
        removed, added = changed_lines(edit)
        assert len(removed) == 1 and removed[0].startswith(f'        "{key}": ') and not added
        assert_only_deleted(commented, edit, {("UNIMPLEMENTED_XFAILLIST", key)})
        # the heading now sits directly above the next entry of its group
        assert common_mps.parse(edit.after, REL).for_key(survivor)[0].comment_span is not None


def test_a_heading_goes_when_its_whole_group_goes(commented):
    keys = ("nn.functional.max_unpool1d", "nn.functional.max_unpool2d")
    edit = apply_xfail_changes(
        commented, REL, [delete("UNIMPLEMENTED_XFAILLIST", key) for key in keys]
    )
    removed, added = changed_lines(edit)
    assert removed[0] == "        # Pooling of integers"
    assert len(removed) == 3 and added == []
    assert_only_deleted(commented, edit, {("UNIMPLEMENTED_XFAILLIST", key) for key in keys})


def test_a_commented_out_entry_is_part_of_the_group_and_stays(commented):
    keys = ["cholesky_inverse", "ormqr"]
    kept = apply_xfail_changes(
        commented, REL, [delete("UNIMPLEMENTED_XFAILLIST", key) for key in keys]
    )
    assert "# No Metal kernel has been written for these" in kept.after
    assert_only_deleted(commented, kept, {("UNIMPLEMENTED_XFAILLIST", key) for key in keys})

    keys.append("histogramdd")
    gone = apply_xfail_changes(
        commented, REL, [delete("UNIMPLEMENTED_XFAILLIST", key) for key in keys]
    )
    removed, added = changed_lines(gone)
    assert removed[0] == "        # No Metal kernel has been written for these"
    assert len(removed) == 4 and added == []
    assert '        # "lu_solve": None,\n        # The sampler' in gone.after


def test_trailing_comments_go_with_their_entry(commented):
    one_line = apply_xfail_changes(commented, REL, [delete("UNIMPLEMENTED_XFAILLIST", "cummax")])
    assert changed_lines(one_line) == (
        ['        "cummax": [torch.bool],  # MPS sorts bools as bytes'],
        [],
    )
    multi = apply_xfail_changes(commented, REL, [delete("UNIMPLEMENTED_XFAILLIST", "cummin")])
    removed, added = changed_lines(multi)
    assert removed[-1] == "        ],  # same as cummax"
    assert len(removed) == 4 and added == []
    for edit, key in ((one_line, "cummax"), (multi, "cummin")):
        assert_only_deleted(commented, edit, {("UNIMPLEMENTED_XFAILLIST", key)})


def test_narrowing_keeps_every_comment_of_the_entry(commented):
    changes = [
        narrow("UNIMPLEMENTED_XFAILLIST", "addbmm", ("int8",)),
        narrow("UNIMPLEMENTED_XFAILLIST", "round", ("float16",)),
        narrow("UNIMPLEMENTED_XFAILLIST", "cummin", ("bool",)),
        narrow("SKIPLIST", "cross", None),
    ]
    removed, added = changed_lines(apply_xfail_changes(commented, REL, changes))
    assert all("#" not in line for line in removed + added)
    assert removed == [
        "            torch.bfloat16,",
        '        "addbmm": [torch.int8, torch.int16],',
        "            torch.uint8,",
        '        "cross": [torch.int64],',
    ]
    assert added == ['        "addbmm": [torch.int8],', '        "cross": None,']


def test_a_removal_between_blank_lines_leaves_one_blank_line(commented):
    middle = apply_xfail_changes(
        commented, REL, [delete("UNDEFINED_XFAILLIST", "index_reduceamax")]
    )
    removed, added = changed_lines(middle)
    assert sorted(removed) == [
        "",
        '        "index_reduceamax": [torch.float16, torch.int32],',
        "        # Reads uninitialised memory",
    ]
    assert added == []
    assert '"polar": None,\n\n        "diag_embed"' in middle.after
    first = apply_xfail_changes(commented, REL, [delete("UNDEFINED_XFAILLIST", "polar")])
    assert "UNDEFINED_XFAILLIST = {\n        # Reads uninitialised memory\n" in first.after
    last = apply_xfail_changes(commented, REL, [delete("SKIPLIST", "cross")])
    assert changed_lines(last) == (
        ["        # Hangs the GPU on M1", '        "cross": [torch.int64],'],
        [],
    )
    for edit, key in ((middle, "index_reduceamax"), (first, "polar")):
        assert_only_deleted(commented, edit, {("UNDEFINED_XFAILLIST", key)})


# entries with comment lines of their own above the key, read from each release's file
REAL_COMMENTED = {"2.13.0": 40, "2.15.0": 28}


@pytest.mark.slow
@pytest.mark.realdata
def test_real_file_each_commented_entry_deleted_alone(real_common_mps, real_release):
    text = real_common_mps.read_text()
    model = common_mps.parse(text, REL)
    commented_entries = [e for e in model.entries if e.comment_span is not None]
    assert len(commented_entries) == per_release(REAL_COMMENTED, real_release)
    dropped_comments = kept_comments = 0
    for entry in commented_entries:
        change = XfailChange(entry.list, entry.function, entry.key, None, delete=True)
        edit = apply_xfail_changes(text, REL, [change])
        before = [e for e in model.entries if e is not entry]
        after = common_mps.parse(edit.after, REL)
        assert len(after.entries) == len(model.entries) - 1, entry.key
        assert entries(after) == [(e.list, e.function, e.key, e.dtypes) for e in before]
        old_lines, new_lines = text.splitlines(), edit.after.splitlines()
        for old, new in zip(before, after.entries, strict=True):
            assert heading(new, after, new_lines) == heading(old, model, old_lines), (
                f"deleting {entry.key!r} changed the comments heading {old.key!r}"
            )
        own = entry.comment_span.end - entry.comment_span.start + 1
        removed, _ = changed_lines(edit)
        if len(removed) > entry.span.end - entry.span.start + 1:
            assert len(removed) == entry.span.end - entry.span.start + 1 + own
            dropped_comments += 1
        else:
            kept_comments += 1
    assert dropped_comments and kept_comments
