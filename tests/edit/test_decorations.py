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


@pytest.mark.realdata
def test_every_judgeable_entry_of_the_newest_wheel_is_deleted_and_narrowed_cleanly():
    from pipeline.results.decorations import split
    from tests.releases import NEWEST, release_tree

    root = release_tree(NEWEST)
    found = decorations.read(root).entries
    judged, _ = split(found, {d.key for d in found})
    assert judged  # 2.15.0: 4 (docs/performance.md)
    for entry in judged:
        path, line = entry.at.rsplit(":", 1)
        text = (root / path).read_text()
        edit = apply_decoration_changes(
            text, path, [DecorationChange(int(line), entry.key, None, True)]
        )
        assert len(decorations.parse(edit.after, path).decorations) == (
            len(decorations.parse(text, path).decorations) - 1
        )
