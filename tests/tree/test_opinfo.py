"""OpInfo metadata: the static table, the op_db dump and its disk cache."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.errors import ConfigError, DocumentError, ParseError
from pipeline.tree.opinfo import (
    MpsDecorator,
    OpDbDump,
    OpInfoRecord,
    load_opinfos,
    load_table,
    operator_spelling,
)

TABLE = Path(__file__).parent.parent / "fixtures" / "opinfo" / "opinfo_table.yaml"
INTERNAL = Path("torch", "testing", "_internal")


def settings_for(tmp_path: Path, root: Path, **changes):
    settings = load_settings(
        {"root": str(root), "state_dir": str(tmp_path / "state")}, env={}, cwd=tmp_path
    )
    return dataclasses.replace(settings, **changes)


# --- records and the table ---------------------------------------------------------------


def test_table_records():
    atan2, area, nearest, norm, hypot = load_table(TABLE)
    assert atan2 == OpInfoRecord(
        name="atan2",
        variant_test_name="",
        aten_name="atan2",
        aliases=("arctan2",),
        dtypes=("float32", "float16", "bfloat16", "int64", "bool"),  # canonical, sorted
        decorators=(),
        output_dtypes=(("float32", "float32"), ("float16", "float16"), ("int64", "float32")),
    )
    assert area.key == "nn.functional.interpolatearea"
    assert area.decorators == (
        MpsDecorator(
            "tolerance",
            "TestConsistency.test_output_match",
            None,
            "torch/testing/_internal/common_methods_invocations.py:100",
        ),
        MpsDecorator("xfail", "TestCommon.test_out", ("float32",), ""),
    )
    assert nearest.aten_name == "nn.functional.interpolate"  # defaults to the name
    assert norm.dtypes == ("float32", "complex64", "complex32")
    assert hypot.dtypes == () and hypot.test_ids() == ()
    assert hypot.output_dtypes == () and hypot.output_dtype("float32") is None


@pytest.mark.parametrize(
    ("name", "operator"),
    [
        ("atan2", "atan2"),
        ("special_erfcx", "special_erfcx"),
        # op_db's aten_name defaults to the name: a Python namespace keeps its dots
        ("special.bessel_j0", "special_bessel_j0"),
        ("linalg.tensorinv", "linalg_tensorinv"),
        ("fft.fftshift", "fft_fftshift"),
        ("sparse.sampled_addmm", "sparse_sampled_addmm"),
        # torch.nn.functional calls the python_module: nn operators, which have no prefix
        ("nn.functional.elu", "elu"),
        ("torch.special.gammainc", "special_gammainc"),
        ("torch._scaled_mm", "_scaled_mm"),
        ("torch.ops.aten._safe_softmax.default", "_safe_softmax"),
    ],
)
def test_operator_spelling_is_the_yaml_name(name, operator):
    assert operator_spelling(name) == operator


def _record(name: str, aten_name: str, aliases: tuple[str, ...] = ()) -> OpInfoRecord:
    return OpInfoRecord(name, "", aten_name, aliases, ("float32",))


def test_the_names_an_opinfo_is_found_by():
    bessel = _record("special.bessel_j0", "special.bessel_j0")
    assert bessel.operator == "special_bessel_j0"
    assert bessel.names == {"special.bessel_j0", "special_bessel_j0"}
    assert bessel.key == "special.bessel_j0"  # what common_mps.py's lists are keyed by
    erf = _record("erf", "erf", ("special.erf",))
    assert erf.alias_names == {"special.erf", "special_erf"}
    assert erf.names == {"erf", "special.erf", "special_erf"}
    # an aten_name op_db sets is the operator: the name is not respelt (aten's unfold is a
    # view, not nn.functional.unfold)
    unfold = _record("nn.functional.unfold", "im2col")
    assert unfold.operator == "im2col" and "unfold" not in unfold.names


def test_output_dtype_lookup():
    atan2 = load_table(TABLE)[0]
    assert atan2.output_dtype("int64") == atan2.output_dtype("torch.long") == "float32"
    assert atan2.output_dtype("half") == "float16"
    assert atan2.output_dtype("bool") is None  # tested, but not in the table: unknown


def test_stems_and_test_ids():
    _, area, nearest, norm, _ = load_table(TABLE)
    assert area.stem == "nn_functional_interpolate_area"
    assert area.test_ids() == (
        "TestConsistencyMPS::test_output_match_nn_functional_interpolate_area_mps_float32",
        "TestConsistencyMPS::test_output_match_nn_functional_interpolate_area_mps_float16",
    )
    assert nearest.stem == "nn_functional_interpolate_nearest-exact"
    assert norm.stem == "linalg_vector_norm_sub_variant"  # like OpInfo.formatted_name
    assert nearest.test_ids("output_grad_match") == (
        "TestConsistencyMPS::test_output_grad_match_nn_functional_interpolate_nearest-exact_mps_float32",
    )
    with pytest.raises(ValueError, match="unknown test kind"):
        area.test_ids("output")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("- name: a\n  dtypes: [float32]\n  flavour: x\n", 1, "unknown key"),
        ("- name: a\n  dtypes: [float32]\n- name: b\n", 3, "'dtypes' is required"),
        ("- name: a\n  dtypes: [float32]\n- name: a\n  dtypes: []\n", 3, "duplicate OpInfo 'a'"),
        ("- name: a\n  dtypes: [float33]\n", 1, "unknown dtype"),
        ("- name: a\n  dtypes: [int64]\n  output_dtypes: {int64: float33}\n", 1, "a: unknown"),
        ("- name: a\n  dtypes: [int64]\n  output_dtypes: {int46: int64}\n", 1, "a: unknown"),
        ("- name: a\n  dtypes: [int64]\n  output_dtypes: [int64]\n", 1, "a: output_dtypes"),
        (
            "- name: a\n  dtypes: [int64]\n- name: b\n  dtypes: [int64]\n"
            "  output_dtypes: {int64: float32, int8: float32}\n",
            3,
            r"b: output_dtypes for dtype\(s\) \['int8'\] not in its dtypes",
        ),
        ("- dtypes: [float32]\n", 1, "'name' is required"),
        ("- name: a\n  dtypes: []\n  decorators: [{test: x}]\n", 1, "with a 'kind'"),
        ("name: a\n", 1, "YAML list"),
        ("- name: [a\n", 2, "not YAML"),
    ],
)
def test_table_errors_name_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "table.yaml"
    path.write_text(text)
    with pytest.raises(ParseError, match=message) as info:
        load_table(path)
    assert info.value.path == str(path) and info.value.line == line


def test_load_opinfos_uses_the_table_when_set(tmp_path):
    settings = settings_for(tmp_path, tmp_path, opinfo_table=TABLE, python="/nonexistent/python")
    keys = [r.key for r in load_opinfos(settings.tree)]
    assert keys[:2] == ["atan2", "nn.functional.interpolatearea"]


# --- the op_db dump through a fake interpreter: cache behaviour without torch --------------

CANNED = {
    "torch_version": "0.0",
    "torch_file": "x",
    "allowed_dtypes": [],
    "ops": [
        {
            "name": "atan2",
            "variant_test_name": "",
            "aten_name": "atan2",
            "aliases": ["arctan2"],
            "dtypes": ["int64", "float32"],
            "decorators": [
                {"kind": "skip", "test": None, "dtypes": ["float16"], "where": "f.py:3"}
            ],
            "output_dtypes": {"int64": "float32", "float32": "float32"},
        }
    ],
}


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    """An 'interpreter' that logs its calls; <dump script> OUT writes CANNED; -c <locate> prints."""
    site = tmp_path / "site" / "torch"
    (site / "testing" / "_internal").mkdir(parents=True)
    (site / "testing" / "_internal" / "common_methods_invocations.py").write_text("op_db = []\n")
    script = tmp_path / "fake-python"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(tmp_path / 'calls')!r}, 'a').write('call\\n')\n"
        "if sys.argv[1] != '-c':\n"
        f"    json.dump({CANNED!r}, open(sys.argv[2], 'w'))\n"
        "else:\n"
        f"    print({str(site)!r})\n"
    )
    script.chmod(0o755)
    return script


def calls(tmp_path: Path) -> int:
    log = tmp_path / "calls"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_checkout_sources_key_the_cache(tmp_path, fake_python):
    root = tmp_path / "pytorch"
    internal = root / INTERNAL
    (internal / "opinfo").mkdir(parents=True)
    (internal / "common_methods_invocations.py").write_text("op_db = []\n")
    (internal / "common_utils.py").write_text("x = 1\n")
    settings = settings_for(tmp_path, root, python=str(fake_python))

    (record,) = load_opinfos(settings.tree)
    assert record.dtypes == ("float32", "int64")
    assert record.decorators == (MpsDecorator("skip", None, ("float16",), "f.py:3"),)
    assert record.output_dtypes == (("float32", "float32"), ("int64", "float32"))
    assert calls(tmp_path) == 1  # the dump only: no need to locate torch in a checkout
    load_opinfos(settings.tree)
    assert calls(tmp_path) == 1  # warm: no interpreter started
    (internal / "common_utils.py").write_text("x = 2\n")  # not an op_db source
    load_opinfos(settings.tree)
    assert calls(tmp_path) == 1
    (internal / "opinfo" / "definitions.py").write_text("more = []\n")
    load_opinfos(settings.tree)
    assert calls(tmp_path) == 2  # an op_db source changed: dumped again


def test_installed_torch_is_located_once(tmp_path, fake_python):
    settings = settings_for(tmp_path, tmp_path, python=str(fake_python))
    load_opinfos(settings.tree)
    assert calls(tmp_path) == 2  # locate + dump
    load_opinfos(settings.tree)
    assert calls(tmp_path) == 2
    recorded = json.loads((settings.cache_dir / "opinfo-locations.json").read_text())
    assert recorded == {
        str(fake_python): str(tmp_path / "site" / "torch" / "testing" / "_internal")
    }


def test_state_dirs_sharing_math_cache_dump_op_db_once(tmp_path, fake_python):
    """math.cache is torch's answers by digest: a second state dir (a worktree, a runner's
    second checkout) reuses op_db's dump instead of importing torch again."""
    shared = tmp_path / "answers"
    for state in ("one", "two"):
        settings = load_settings(
            {"root": str(tmp_path), "state_dir": str(tmp_path / state), "python": str(fake_python)},
            env={"MPS_PIPELINE_MATH_CACHE": str(shared)},
            cwd=tmp_path,
        )
        (record,) = load_opinfos(settings.tree)
        assert record.name == "atan2"
    # locate torch once per state dir (its own opinfo-locations.json), dump once in all
    assert calls(tmp_path) == 3
    assert [p.name.startswith("opinfo-") for p in shared.iterdir()] == [True]
    assert not list((tmp_path / "two" / "cache").glob("opinfo-[0-9a-f]*.json"))


def test_interpreter_failures_are_config_errors(tmp_path):
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named numpy' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(ConfigError, match="No module named numpy"):
        load_opinfos(settings_for(tmp_path, tmp_path, python=str(broken)).tree)
    with pytest.raises(ConfigError, match="cannot locate torch"):
        load_opinfos(settings_for(tmp_path, tmp_path, python=str(tmp_path / "missing")).tree)


# --- the real op_db of the installed torch ------------------------------------------------


def _can_import_op_db() -> bool:
    return all(importlib.util.find_spec(m) for m in ("torch", "numpy", "expecttest"))


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    if not _can_import_op_db():
        pytest.skip("op_db needs torch, numpy and expecttest in this interpreter")
    tmp = tmp_path_factory.mktemp("opinfo")
    settings = settings_for(tmp, tmp)
    return settings, {r.key: r for r in load_opinfos(settings.tree)}


@pytest.mark.realdata
@pytest.mark.slow
def test_real_op_db(real, monkeypatch):
    settings, records = real
    assert len(records) > 650
    atan2 = records["atan2"]
    assert atan2.aliases == ("arctan2",)
    assert {"float32", "float16", "int64", "bool"} <= set(atan2.dtypes)
    assert "float64" not in atan2.dtypes and "complex128" not in atan2.dtypes

    variants = sorted(
        r.variant_test_name for r in records.values() if r.name == "nn.functional.interpolate"
    )
    assert variants == sorted(
        ["nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area"]
    )
    area = records["nn.functional.interpolatearea"]
    assert area.stem == "nn_functional_interpolate_area"
    assert "TestConsistencyMPS::test_output_match_nn_functional_interpolate_area_mps_float32" in (
        area.test_ids()
    )
    # test_mps.py's own addition to the consistency op list
    assert records["_upsample_bicubic2d_aa"].aten_name == "_upsample_bicubic2d_aa"
    # MPS decorators come with the file:line of their DecorateInfo
    mps_tolerances = [
        d
        for r in records.values()
        for d in r.decorators
        if d.test == "TestConsistency.test_output_match" and d.kind == "tolerance"
    ]
    assert mps_tolerances
    assert all(d.where for r in records.values() for d in r.decorators)
    assert mps_tolerances[0].where.startswith("torch/testing/_internal/")

    def no_subprocess(*args, **kwargs):
        raise AssertionError("a warm load must not start an interpreter")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert {r.key: r for r in load_opinfos(settings.tree)} == records


def _direct_dtype(op: str, dtype: str, arity: int, **kwargs) -> str:
    """What torch itself gives for ``op`` on ``arity`` small ``dtype`` tensors, here in the
    test process: an independent check of what the dump recorded from OpInfo samples."""
    import torch

    args = [torch.ones(3, dtype=getattr(torch, dtype))] * arity
    return str(getattr(torch, op)(*args, **kwargs).dtype).removeprefix("torch.")


@pytest.mark.realdata
@pytest.mark.slow
def test_real_output_dtypes(real):
    _, records = real
    sampled = [r for r in records.values() if r.dtypes]
    covered = [r for r in sampled if len(r.output_dtypes) * 2 >= len(r.dtypes)]
    pairs = sum(len(r.dtypes) for r in sampled)
    known = sum(len(r.output_dtypes) for r in sampled)
    # torch 2.13.0: 661 of 698 OpInfos, 4746 of 5042 (OpInfo, dtype) pairs; the rest are
    # dtypes test_mps.py tests that CPU rejects (bool pooling, half special functions...)
    assert len(covered) >= 0.9 * len(sampled) and known >= 0.9 * pairs
    assert all(set(dict(r.output_dtypes)) <= set(r.dtypes) for r in sampled)

    assert records["atan2"].output_dtype("int64") == "float32"
    assert records["neg"].output_dtype("int64") == "int64"
    assert records["sqrt"].output_dtype("bool") == "float32"
    assert records["eq"].output_dtype("float32") == "bool"
    assert records["abs"].output_dtype("complex64") == "float32"
    assert records["divtrunc_rounding"].output_dtype("int32") == "int32"
    checks = {  # OpInfo key -> (torch function, arity, kwargs)
        "atan2": ("atan2", 2, {}),
        "neg": ("neg", 1, {}),
        "sqrt": ("sqrt", 1, {}),
        "eq": ("eq", 2, {}),
        "add": ("add", 2, {}),
        "sum": ("sum", 1, {}),
        "divno_rounding_mode": ("div", 2, {}),
        "divfloor_rounding": ("div", 2, {"rounding_mode": "floor"}),
    }
    for key, (op, arity, kwargs) in checks.items():
        recorded = dict(records[key].output_dtypes)
        assert len(recorded) == len(records[key].dtypes), key
        assert recorded == {d: _direct_dtype(op, d, arity, **kwargs) for d in recorded}, key


def test_an_interpreter_without_torch_is_one_line_saying_what_to_do(tmp_path):
    # a real interpreter without torch: a venv of the base Python with no packages
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the base interpreter has torch")
    with pytest.raises(ConfigError) as caught:
        load_opinfos(settings_for(tmp_path, tmp_path, python=python).tree)
    message = str(caught.value)
    assert message == (
        f"python={python} has no torch: pip install torch into it, point python= (--python, "
        "MPS_PIPELINE_PYTHON) at an interpreter that has it, or set opinfo_table to a static "
        "table"
    )


def test_a_failed_dump_is_one_line_with_the_exception_that_ended_it(tmp_path):
    broken = tmp_path / "broken-python"
    broken.write_text(
        "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
        "echo '  File x, line 1' >&2\necho 'ModuleNotFoundError: No module named numpy' >&2\n"
        "exit 1\n"
    )
    broken.chmod(0o755)
    with pytest.raises(ConfigError) as caught:
        load_opinfos(settings_for(tmp_path, tmp_path, python=str(broken)).tree)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert f"python={broken} could not locate torch (exit 1): ModuleNotFoundError: No module " in (
        message
    )


def test_the_dump_is_read_once_every_key_checked():
    dump = OpDbDump.from_json(
        {**CANNED, "backward_dtypes": {"x_backward": {"int64": "float32"}}}, "d.json"
    )
    assert [r.key for r in dump.records] == ["atan2"]
    assert dump.backward_dtypes == {"x_backward": (("int64", "float32"),)}
    assert OpDbDump.from_json(CANNED, "d.json").backward_dtypes == {}  # unknown
    misspelt = {**CANNED, "ops": [{**CANNED["ops"][0], "aten": "atan2"}]}
    with pytest.raises(DocumentError, match=r"d.json: ops\[0\] has unknown key\(s\) 'aten'"):
        OpDbDump.from_json(misspelt, "d.json")
    no_kind = {**CANNED, "ops": [{**CANNED["ops"][0], "decorators": [{"test": None}]}]}
    with pytest.raises(DocumentError, match=r"ops\[0\]\.decorators\[0\]\.kind must be str"):
        OpDbDump.from_json(no_kind, "d.json")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("  aliases: arctan2\n", "a: aliases must be a list of strings"),
        ("  decorators: [{kind: xfail, where: 12}]\n", "a: a decorator's where must be a string"),
        ("  output_dtypes: null\n", None),
    ],
)
def test_table_fields_are_checked_at_their_line(tmp_path, entry, message):
    path = tmp_path / "table.yaml"
    path.write_text("- name: z\n  dtypes: [int64]\n- name: a\n  dtypes: [int64]\n" + entry)
    if message is None:
        assert load_table(path)[1].output_dtypes == ()
        return
    with pytest.raises(ParseError, match=message) as info:
        load_table(path)
    assert info.value.line == 3
