"""The impact analysis on released wheels' own files (OLDEST and NEWEST), edited in a git copy."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.impact import Impact, analyze, changed_files, load_view
from pipeline.impact.analyze import COMMON_MPS, OPINFO_DEFINITIONS
from pipeline.impact.view import NATIVE_YAML
from pipeline.tree import common_mps, native_yaml
from pipeline.tree.opinfo import OpInfoRecord
from tests.conftest import git_init

pytestmark = pytest.mark.realdata


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pytorch"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git_init(root)
    return root


def _commit_edit(
    root: Path, rel: str, old: str, new: str, opinfos=(), text: str | None = None
) -> Impact:
    """Replace ``old`` by ``new`` in ``rel`` (or write ``text``), commit, analyse the commit."""
    if text is None:
        text = (root / rel).read_text()
        assert text.count(old) == 1, f"{old!r} must occur once in {rel}"
        text = text.replace(old, new)
    (root / rel).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "commit", "-qam", "edit"], check=True)
    changes = changed_files(root, "HEAD~1", "HEAD")
    return analyze(changes, opinfos=opinfos, view=load_view(root, "HEAD"))


@pytest.mark.slow
def test_dispatch_change_in_the_real_yaml_names_exactly_that_operator(
    tmp_path: Path, real_native_yaml: Path
) -> None:
    text = real_native_yaml.read_text()
    root = _repo(tmp_path, {NATIVE_YAML: text})
    # logit.out's rows as the release has them (2.15 added XPU to the shared one), folded
    (entry,) = [
        e for e in native_yaml.parse(text, NATIVE_YAML).entries if e.full_name == "logit.out"
    ]
    shared, mps = (next(r for r in entry.dispatch if key in r.keys) for key in ("CPU", "MPS"))
    assert mps.kernel == "logit_out_mps" and shared.kernel == "logit_out"
    logit = OpInfoRecord("logit", "", "logit", (), ("float32", "float16"))
    others = OpInfoRecord("atan2", "", "atan2", ("arctan2",), ("float32",))
    impact = _commit_edit(
        root,
        NATIVE_YAML,
        f"{shared.text}\n{mps.text}\n",
        shared.text.replace(":", ", MPS:", 1) + "\n",
        opinfos=(logit, others),
    )
    assert impact.operator_names == ("logit",)
    (reason,) = impact.operators[0].reasons
    assert reason.startswith("native_functions.yaml:")
    assert reason.endswith("dispatch of logit.out changed (MPS: logit_out_mps -> logit_out)")
    assert impact.build_needed and not impact.full_sweep
    assert impact.test_ids == (
        "TestConsistencyMPS::test_output_match_logit_mps_float32",
        "TestConsistencyMPS::test_output_match_logit_mps_float16",
    )
    assert (impact.selected, impact.total) == (2, 3)


@pytest.mark.slow
def test_comment_edit_in_the_real_yaml_affects_nothing(
    tmp_path: Path, real_native_yaml: Path
) -> None:
    root = _repo(tmp_path, {NATIVE_YAML: real_native_yaml.read_text()})
    impact = _commit_edit(
        root,
        NATIVE_YAML,
        "- func: atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)\n"
        "  device_check: NoCheck   # TensorIterator\n",
        "- func: atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)\n"
        "  # a new comment line\n  device_check: NoCheck   # TensorIterator (reworded)\n",
    )
    assert impact.operators == () and not impact.build_needed and not impact.full_sweep


def test_removing_a_real_xfail_entry_names_its_key(tmp_path: Path, real_common_mps: Path) -> None:
    text = real_common_mps.read_text()
    model = common_mps.parse(text, COMMON_MPS)
    lines = text.splitlines(keepends=True)
    entry = next(
        e
        for e in model.entries
        if e.dtypes
        and e.span.start == e.span.end
        and lines[e.span.start - 1].rstrip().endswith(",")
        and lines.count(lines[e.span.start - 1]) == 1
        and sum(1 for o in model.entries if o.key == e.key) == 1
    )
    root = _repo(tmp_path, {COMMON_MPS: text})
    impact = _commit_edit(root, COMMON_MPS, lines[entry.span.start - 1], "")
    assert impact.operator_names == (entry.key,)
    assert f"{entry.list} entry {entry.key!r} removed" in impact.operators[0].reasons[0]
    assert not impact.build_needed and not impact.full_sweep


@pytest.mark.slow
def test_real_opinfo_definition_and_its_sample_inputs(
    tmp_path: Path, real_common_mps: Path
) -> None:
    source = real_common_mps.parent / "common_methods_invocations.py"
    rel = OPINFO_DEFINITIONS[0]
    text = source.read_text()
    edits = {
        # inside the OpInfo('logit', ...) call
        "                   sample_inputs_func=sample_inputs_logit),\n": (
            "                   sample_inputs_func=sample_inputs_logit,\n"
            "                   supports_out=False),\n"
        ),
        # inside the sample-inputs function only that OpInfo uses
        "    low, high = op_info.domain\n\n    # Note: Operator is very": (
            "    low, high = op_info.domain\n    low = low\n\n    # Note: Operator is very"
        ),
    }
    root = _repo(tmp_path, {rel: text})
    for old, new in edits.items():
        assert text.count(old) == 1
        text = text.replace(old, new)
    logit = OpInfoRecord("logit", "", "logit", (), ("float32",))
    impact = _commit_edit(root, rel, "", "", opinfos=(logit,), text=text)
    assert impact.operator_names == ("logit",)
    reasons = impact.operators[0].reasons
    assert any("OpInfo logit definition changed" in r for r in reasons)
    assert any("sample_inputs_logit, used by OpInfo logit, changed" in r for r in reasons)
    assert impact.test_ids == ("TestConsistencyMPS::test_output_match_logit_mps_float32",)
    assert not impact.build_needed and not impact.full_sweep
