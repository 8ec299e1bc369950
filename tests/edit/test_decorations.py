"""pipeline/edit/decorations.py: a DecorateInfo deleted or narrowed, layout kept, the result
verified (issue 31), on tests/fixtures/decorations' common_methods_invocations.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.edit import decorations as editor
from pipeline.edit.decorations import DecorationChange, apply_decoration_changes
from pipeline.errors import EditVerificationError
from pipeline.tree import decorations

CMI = "torch/testing/_internal/common_methods_invocations.py"
TEXT = (Path(__file__).parents[1] / "fixtures" / "decorations" / CMI).read_text()


def removed_and_added(edit) -> tuple[list[str], list[str]]:
    lines = edit.diff().splitlines()[2:]
    return (
        [line[1:].strip() for line in lines if line.startswith("-")],
        [line[1:].strip() for line in lines if line.startswith("+")],
    )


def test_delete_removes_the_call_and_nothing_else():
    edit = apply_decoration_changes(TEXT, CMI, [DecorationChange(21, "atan2", None, delete=True)])
    gone, added = removed_and_added(edit)
    assert gone == [
        "# MPS: integer inputs round differently",  # the comment that explained it
        "DecorateInfo(unittest.expectedFailure, 'TestConsistency', 'test_output_match',",
        "device_type='mps', dtypes=(torch.int64, torch.int32)),",
    ]
    assert added == []
    assert "atan2" in edit.summary and f"{CMI}:21" in edit.summary
    # the CUDA entry beside it is untouched, and the MPS ones left read back the same
    after = decorations.parse(edit.after, CMI).decorations
    assert [d.key for d in after] == ["atan", "clamp_max", "nn.functional.padconstant",
                                      "_refs.clamp_max", "_refs.clamp_max"]  # fmt: skip
    assert "device_type='cuda'" in edit.after


def test_narrow_keeps_the_literal_as_written():
    edit = apply_decoration_changes(TEXT, CMI, [DecorationChange(21, "atan2", ("int32",))])
    gone, added = removed_and_added(edit)
    assert gone == ["device_type='mps', dtypes=(torch.int64, torch.int32)),"]
    assert added == ["device_type='mps', dtypes=(torch.int32,)),"]


def test_an_all_dtypes_entry_gains_dtypes_and_a_lone_entry_leaves_an_empty_tuple():
    changes = [
        DecorationChange(38, "clamp_max", ("float32",)),
        DecorationChange(44, "nn.functional.padconstant", None, delete=True),
    ]
    edit = apply_decoration_changes(TEXT, CMI, changes)
    after = {d.key: d for d in decorations.parse(edit.after, CMI).decorations}
    assert after["clamp_max"].dtypes == ("float32",)
    assert "nn.functional.padconstant" not in after
    assert "           skips=(\n           )),\n" in edit.after
    compile(edit.after, CMI, "exec")


def test_a_line_that_holds_no_such_entry_writes_nothing():
    with pytest.raises(EditVerificationError, match="no MPS DecorateInfo of 'atan2'"):
        apply_decoration_changes(TEXT, CMI, [DecorationChange(22, "atan2", None, delete=True)])
    with pytest.raises(EditVerificationError, match="no MPS DecorateInfo of 'atan'"):
        apply_decoration_changes(TEXT, CMI, [DecorationChange(21, "atan", None, delete=True)])


def test_an_edit_that_changes_more_than_intended_is_refused(monkeypatch):
    # a sequence helper that drops the neighbour too: the syntax tree check catches it
    original = editor.remove_elements

    def greedy(elements, opening, closing, drops):
        return original(elements, opening, closing, {**drops, len(elements) - 1: 0})

    monkeypatch.setattr(editor, "remove_elements", greedy)
    with pytest.raises(EditVerificationError, match="not the old one with exactly"):
        apply_decoration_changes(TEXT, CMI, [DecorationChange(21, "atan2", None, delete=True)])


# --- the comment lines that go with a deleted entry ---------------------------------------

OPINFO = """import unittest

import torch
from torch.testing._internal.opinfo.core import DecorateInfo, OpInfo

op_db = [
    OpInfo('atan2',
           skips=(
{body}
           )),
]
"""


def mps(test: str, comment: str = "") -> str:
    line = f"DecorateInfo(unittest.expectedFailure, 'TestCommon', '{test}', device_type='mps'),"
    return line + (f"  {comment}" if comment else "")


def cuda(test: str, comment: str = "") -> str:
    line = f"DecorateInfo(unittest.skip('Skipped!'), 'TestCommon', '{test}', device_type='cuda'),"
    return line + (f"  {comment}" if comment else "")


def drop(body: list[str], *tests: str) -> list[str]:
    """The tuple's lines after deleting the MPS entries of ``tests`` (dedented)."""
    text = OPINFO.format(body="\n".join(f"               {b}" if b else "" for b in body))
    marks = [f"'{t}', device_type='mps'" for t in tests]
    at = [n for n, line in enumerate(text.splitlines(), 1) for m in marks if m in line]
    assert len(at) == len(tests)
    changes = [DecorationChange(n, "atan2", None, delete=True) for n in at]
    after = apply_decoration_changes(text, CMI, changes).after
    compile(after, CMI, "exec")
    assert not {d.test for d in decorations.parse(after, CMI).decorations} & {
        f"TestCommon.{t}" for t in tests
    }
    out = after.splitlines()
    inside = out[out.index("           skips=(") + 1 : out.index("           )),")]
    return [line.strip() for line in inside]


def test_the_comment_above_a_deleted_entry_goes_with_it_and_the_neighbours_stay():
    body = ["# why a", cuda("test_a"), "# why b", mps("test_b"), "# why c", cuda("test_c")]
    assert drop(body, "test_b") == ["# why a", cuda("test_a"), "# why c", cuda("test_c")]


def test_a_trailing_comment_goes_and_the_previous_entrys_stays():
    body = [cuda("test_a", "# a's own"), mps("test_b", "# b's own"), cuda("test_c")]
    assert drop(body, "test_b") == [cuda("test_a", "# a's own"), cuda("test_c")]


def test_a_comment_after_a_blank_line_is_a_sections_and_stays():
    body = [cuda("test_a"), "", "# MPS failures", "", mps("test_b"), cuda("test_c")]
    assert drop(body, "test_b") == [cuda("test_a"), "", "# MPS failures", "", cuda("test_c")]


def test_the_first_and_the_last_entry_take_their_comments():
    body = ["# why a", mps("test_a"), cuda("test_b"), "# why c", mps("test_c")]
    assert drop(body, "test_a") == [cuda("test_b"), "# why c", mps("test_c")]
    assert drop(body, "test_c") == ["# why a", mps("test_a"), cuda("test_b")]
    assert drop(body, "test_a", "test_c") == [cuda("test_b")]


def test_a_multi_line_block_goes_whole_and_a_comment_above_a_blank_line_stays():
    body = [cuda("test_a"), "# section", "", "# RuntimeError: adaptive pool MPS: input sizes",
            "# must be divisible by output sizes", mps("test_b"), cuda("test_c")]  # fmt: skip
    assert drop(body, "test_b") == [cuda("test_a"), "# section", "", cuda("test_c")]


def test_a_block_over_several_mps_entries_goes_only_with_all_of_them():
    body = ["# aten::max.unary_out is not implemented for MPS", mps("test_out"),
            mps("test_out_warning"), cuda("test_c")]  # fmt: skip
    assert drop(body, "test_out") == [body[0], mps("test_out_warning"), cuda("test_c")]
    assert drop(body, "test_out", "test_out_warning") == [cuda("test_c")]


def test_a_commented_out_entry_above_is_not_an_explanation_and_stays():
    body = [cuda("test_a"), "# DecorateInfo(unittest.skip('x'), 'TestCommon', 'test_z'),",
            mps("test_b")]  # fmt: skip
    assert drop(body, "test_b") == body[:2]


def test_a_comment_that_should_go_but_stays_is_refused(monkeypatch):
    original = editor.remove_elements

    def keeps_comments(elements, opening, closing, drops):
        return original(elements, opening, closing, dict.fromkeys(drops, 0))

    monkeypatch.setattr(editor, "remove_elements", keeps_comments)
    with pytest.raises(EditVerificationError, match="comments other than"):
        apply_decoration_changes(TEXT, CMI, [DecorationChange(21, "atan2", None, delete=True)])


@pytest.mark.realdata
@pytest.mark.slow  # every entry of a 1 MB file, each edit re-parsed
def test_every_judgeable_entry_of_the_newest_wheel_is_deleted_and_narrowed_cleanly():
    from pipeline.results.decorations import split
    from tests.releases import NEWEST, release_tree

    root = release_tree(NEWEST)
    found = decorations.read(root).entries
    judged, _ = split(found, {d.key for d in found})
    assert judged  # 2.15.0: 4 (docs/performance.md)
    # each file read and counted once: three of the entries share the 1 MB one
    texts = {path: (root / path).read_text() for path, _ in (e.at.rsplit(":", 1) for e in judged)}
    counts = {path: len(decorations.parse(text, path).decorations) for path, text in texts.items()}
    for entry in judged:
        path, line = entry.at.rsplit(":", 1)
        edit = apply_decoration_changes(
            texts[path], path, [DecorationChange(int(line), entry.key, None, True)]
        )
        assert len(decorations.parse(edit.after, path).decorations) == counts[path] - 1
