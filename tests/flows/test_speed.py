"""Speed against the path replaced: the benchmark script run for real (torch, device cpu) on
the sandbox's operators, its figures kept in a real SQLite history, a PR's judged against
main's night-to-night spread from the same device class only (issue 32), and the history
migrated in place to version 4. On a machine without MPS, the default device is refused in
one line (issue 28)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import DamagedHistoryError, NoDeviceError
from pipeline.flows.speed import judge, measure
from pipeline.report.speed import SPREAD_MEANING, not_timed_lines, render_markdown
from pipeline.results import history
from pipeline.results import speed as speeds
from pipeline.results.history_schema import SCHEMA_VERSION
from pipeline.results.speed import Judgement, Measurement
from pipeline.run.speed import BenchOp, SpeedRequest, run
from tests.results.test_device import mac, recorded

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed (nox installs it)"
)
TINY = {"small": (64,), "medium": (32, 32)}
RUNNER = "macos-m2-15"


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, tuple[Measurement, ...], tuple[str, ...]]:
    """atan2 and exp2 timed for real on CPU (the sandbox's OpInfo dtypes)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (nox installs it)")
    from pipeline.config import load_settings
    from pipeline.workspace import prepare

    tmp = tmp_path_factory.mktemp("speed")
    settings = prepare(load_settings({"state_dir": str(tmp / "state")}, env={}, cwd=tmp))
    result = measure(settings, ["atan2", "exp2"], device="cpu", shapes=TINY,
                     min_run_time=0.002, repeats=3, max_run_time=0.01)  # fmt: skip
    return result.path, result.measurements, result.errors


@pytest.mark.slow
@needs_torch
def test_the_written_script_times_every_dtype_shape_and_layout(measured):
    path, found, errors = measured
    data = json.loads(path.read_text())
    assert data["device"] == "cpu" and data["torch"].startswith("2.")
    keys = {m.key for m in found}
    for op in ("atan2", "exp2"):
        for dtype in ("float32", "float16", "int64", "uint8", "bool"):
            for shape in TINY:
                for layout in ("contiguous", "strided"):
                    assert (op, dtype, shape, layout) in keys
    assert errors == ()
    assert all(len(m.times) >= 3 and min(m.times) > 0 for m in found)
    assert (path.parent / "speed_bench.py").read_text().startswith('"""Written by mps-pipeline')


def _scaled(found, factor: float, keep: int | None = None) -> list[Measurement]:
    """The real measurements' medians times ``factor``, with a 2% spread of their own (a
    real run's repeats on a shared 2-core machine spread more: the rule says noise)."""
    return [
        dataclasses.replace(m, times=tuple(m.median * factor * s for s in (0.98, 1.0, 1.02)[:keep]))
        for m in found
    ]


def _history(tmp_path: Path, found, factors: list[float], runner: str = RUNNER,
             devices=None) -> Path:  # fmt: skip
    """Main's nights on ``runner``, its figures ``found`` times each factor; each night's
    device ``devices[night - 1]`` (default: the runner's Mac; None: unknown)."""
    path = tmp_path / "nightly.sqlite"
    db = history.connect(path)
    try:
        for night, factor in enumerate(factors, 1):
            recorded = history.record_nightly(
                db, {runner: []}, commit="", started=f"2026-11-{night:02d}T03:17:00.000000Z"
            )
            run = recorded.runs[0].id
            on = mac(runner) if devices is None else devices[night - 1]
            with db:
                if on is not None:
                    history.record_devices(db, {run: on})
                speeds.record(db, run, _scaled(found, factor))
    finally:
        db.close()
    return path


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@needs_torch
def test_a_pr_is_judged_against_the_night_to_night_spread(measured, tmp_path, sandbox_settings):
    _, found, _ = measured
    steady = _history(tmp_path, found, [1.0, 1.01, 0.99])
    m2 = mac(RUNNER)
    same = judge(sandbox_settings, found, steady, RUNNER, m2)
    assert {v.judgement for v in same.verdicts} == {Judgement.OK}
    slower = judge(sandbox_settings, _scaled(found, 1.5), steady, RUNNER, m2)
    assert {v.judgement for v in slower.verdicts} == {Judgement.SLOWER}
    assert all(1.45 < v.ratio < 1.55 for v in slower.verdicts)
    # another device class has no figures of main: nothing is judged
    other = judge(sandbox_settings, _scaled(found, 1.5), steady, "macos-m1-14",
                  mac("macos-m1-14"))  # fmt: skip
    assert {v.judgement for v in other.verdicts} == {Judgement.NO_BASELINE}
    # two measurements are not enough to flag anything
    few = judge(sandbox_settings, _scaled(found, 1.5, keep=2), steady, RUNNER, m2)
    assert {v.judgement for v in few.verdicts} == {Judgement.TOO_FEW}


SYNTHETIC = (
    Measurement("atan2", "float32", "large", "contiguous", (1.0e-4, 1.01e-4, 0.99e-4)),
    Measurement("sum", "float16", "skinny-column/dim=0", "strided", (2.0e-5, 2.02e-5, 1.98e-5)),
)


def test_main_s_figures_come_from_the_pr_s_device_class_only(tmp_path, sandbox_settings):
    """The runner macos-m2-15 moved from macOS 15 to 26 after three nights, twice as fast
    there; a night without a device record came between: each PR is judged against its own
    class's nights alone, and a class main has no figures of is never compared."""
    m2_15, m2_26 = mac(RUNNER), mac("macos-m2-26")
    nights = [m2_15, m2_15, m2_15, None, m2_26, m2_26, m2_26]
    factors = [1.0, 1.0, 1.0, 0.1, 0.5, 0.5, 0.5]
    at = _history(tmp_path, SYNTHETIC, factors, devices=nights)
    on_15 = judge(sandbox_settings, SYNTHETIC, at, RUNNER, m2_15)
    assert on_15.nights == 3 and {v.judgement for v in on_15.verdicts} == {Judgement.OK}
    assert all(v.ratio is not None and 0.95 < v.ratio < 1.05 for v in on_15.verdicts)
    # the same figures on macOS 26, against main's there: twice as slow
    on_26 = judge(sandbox_settings, SYNTHETIC, at, RUNNER, m2_26)
    assert on_26.nights == 3 and {v.judgement for v in on_26.verdicts} == {Judgement.SLOWER}
    assert all(v.main_median is not None and v.main_median < 0.6e-4 for v in on_26.verdicts[:1])
    # an M1, an M2 Pro (more GPU cores), a VM, the CPU: no baseline, said by class
    for machine in (mac("macos-m1-14"), dataclasses.replace(m2_15, gpu_cores=19),
                    recorded("vm"), None):  # fmt: skip
        report = judge(sandbox_settings, SYNTHETIC, at, RUNNER, machine)
        assert report.nights == 0
        assert {v.judgement for v in report.verdicts} == {Judgement.NO_BASELINE}
        text = render_markdown(report)
        assert f"no baseline for {report.device_class}:" in text
    assert "no baseline for Apple M1, 8 GPU cores, macOS 14:" in render_markdown(
        judge(sandbox_settings, SYNTHETIC, at, RUNNER, mac("macos-m1-14"))
    )


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@needs_torch
def test_a_ratio_inside_main_s_noisy_nights_is_not_flagged(measured, tmp_path, sandbox_settings):
    _, found, _ = measured
    noisy = _history(tmp_path, found, [1.0, 1.3, 0.9, 1.0, 1.25])  # median 1.0, up to 1.3
    report = judge(sandbox_settings, _scaled(found, 1.2), noisy, RUNNER, mac(RUNNER))
    assert {v.judgement for v in report.verdicts} == {Judgement.NOISE}
    assert not report.slower
    strict = dataclasses.replace(
        sandbox_settings, review=dataclasses.replace(sandbox_settings.review, speed_threshold=1.3)
    )
    strictly = judge(strict, _scaled(found, 1.2), noisy, RUNNER, mac(RUNNER))
    assert {v.judgement for v in strictly.verdicts} == {Judgement.OK}


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@needs_torch
def test_the_comment_section_shows_ratios_per_shape_and_dtype(measured, tmp_path,
                                                              sandbox_settings):  # fmt: skip
    _, found, _ = measured
    steady = _history(tmp_path, found, [1.0, 1.0, 1.0])
    pr = _scaled(found, 1.0)
    pr[0] = dataclasses.replace(pr[0], times=tuple(t * 2 for t in pr[0].times))
    report = judge(sandbox_settings, pr, steady, RUNNER, mac(RUNNER))
    text = render_markdown(report)
    first = pr[0]
    assert f"| `{first.op}` | {first.dtype} | {first.shape} | {first.layout} |" in text
    assert "**2.00×** | 1.00× | 🐢 slower |" in text
    assert f"1 of {len(pr)} benchmarks slower than 1.10×" in text
    assert "last 3 nights from the same device class (Apple M2, 10 GPU cores, macOS 15)" in text


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@needs_torch
def test_the_nightly_records_each_runner_s_speed_json(measured, tmp_path):
    path, found, _ = measured
    results = tmp_path / "results"
    (results / RUNNER).mkdir(parents=True)
    (results / RUNNER / speeds.SPEED_JSON).write_text(path.read_text())
    (results / "macos-m1-14").mkdir()
    (results / "macos-m1-14" / speeds.SPEED_JSON).write_text("{not json")
    db = history.connect(tmp_path / "nightly.sqlite")
    night = history.record_nightly(db, {RUNNER: [], "macos-m1-14": []}, commit="", hold=True)
    runs = {r.runner: r.id for r in night.runs}
    history.record_devices(db, {runs[r]: mac(r) for r in runs})
    warnings = speeds.record_night(db, runs, results)
    assert len(warnings) == 1 and "no figures recorded for macos-m1-14" in warnings[0]
    medians = speeds.nightly_medians(db, mac(RUNNER).device_class, 7)
    assert len(medians) == len(found) and all(len(v) == 1 for v in medians.values())
    assert speeds.nightly_medians(db, mac("macos-m1-14").device_class, 7) == {}
    db.close()


def test_a_version_3_history_gets_the_speed_table_in_place(tmp_path):
    path = tmp_path / "nightly.sqlite"
    history.connect(path).close()
    raw = sqlite3.connect(path)
    with raw:  # what a version 3 file is: no speed table
        raw.execute("DROP TABLE speed")
        raw.execute("UPDATE schema_version SET version = 3")
        raw.execute("INSERT INTO runs (started, runner) VALUES ('2026-11-01', 'm')")
    raw.close()
    assert history.check(path).schema_version == 3
    ro = history.open_read_only(path)
    # read-only: not migrated, no figures
    assert speeds.nightly_medians(ro, mac(RUNNER).device_class, 7) == {}
    ro.close()
    db = history.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
    with db:
        speeds.record(db, 1, [Measurement("atan2", "float32", "small", "contiguous", (1e-6,) * 3)])
    db.close()
    assert history.check(path, thorough=True).schema_version == SCHEMA_VERSION
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("DROP TABLE speed")
    raw.close()
    with pytest.raises(
        DamagedHistoryError, match=f"version {SCHEMA_VERSION}, but table speed lacks"
    ):
        history.check(path)


@needs_torch
@pytest.mark.slow
def test_the_speed_command_on_the_cpu_has_no_baseline(measured, tmp_path):
    _, found, _ = measured
    fast_main = _history(tmp_path, found, [0.01, 0.01, 0.01])  # main 100x faster
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPS_PIPELINE_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env.pop("RUNNER_CONFIG", None)
    argv = [sys.executable, "-m", "pipeline", "speed", "atan2", "--device", "cpu",
            "--min-run-time", "0.002", "--max-run-time", "0.01", "--compare", "--runner", RUNNER,
            "--history",
            str(fast_main), "--state-dir", str(tmp_path / "state")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)  # fmt: skip
    # the CPU's figures have no device class: never compared with main's (the Macs')
    assert proc.returncode == 0, proc.stderr
    assert "### Kernel speed against main" in proc.stdout and "🐢 slower" not in proc.stdout
    assert "no baseline for an unknown device class" in proc.stdout
    no_runner = subprocess.run([a for a in argv if a not in ("--runner", RUNNER)],
                               capture_output=True, text=True, env=env, cwd=tmp_path,
                               timeout=600)  # fmt: skip
    assert no_runner.returncode == 2 and "name the runner" in no_runner.stderr


@pytest.mark.slow
def test_the_nightly_command_records_speed_json_beside_the_junit(sandbox_settings, nights,
                                                                 capsys):  # fmt: skip
    from pipeline.__main__ import main
    from pipeline.results import device
    from tests.results.nightly_runs import RUNNERS

    results = nights.results()
    doc = {"schema": 1, "device": "mps", "torch": "2.13.0", "results": [
        {"op": "atan2", "dtype": "float32", "shape": "large", "layout": "strided",
         "elements": 1 << 20, "times": [2.0e-4, 2.1e-4, 1.9e-4]},
        {"op": "atan2", "dtype": "bool", "shape": "large", "layout": "strided",
         "elements": 1 << 20, "error": "TypeError: not for bool"},
    ]}  # fmt: skip
    (results / RUNNERS[0] / speeds.SPEED_JSON).write_text(json.dumps(doc))
    for runner in RUNNERS[:2]:  # the third sent no device.json: its device is unknown
        device.write(results / runner, mac(runner))
    state = ["--state-dir", str(sandbox_settings.state_dir)]
    assert main(["nightly", "--results", str(results), *state]) == 0
    capsys.readouterr()
    db = history.open_read_only(sandbox_settings.state_dir / "history" / "nightly.sqlite")
    try:
        assert speeds.nightly_medians(db, mac(RUNNERS[0]).device_class, 7) == {
            ("atan2", "float32", "large", "strided"): [2.0e-4]
        }
        assert speeds.nightly_medians(db, mac(RUNNERS[1]).device_class, 7) == {}
        # each run keyed by its device; none recorded for the runner without device.json
        recorded = db.execute(
            "SELECT r.runner, d.chip, d.gpu_cores, d.macos, d.macos_build, d.virtualization "
            "FROM run_devices AS d JOIN runs AS r ON r.id = d.run_id ORDER BY r.runner"
        ).fetchall()
        assert recorded == [
            (RUNNERS[0], "Apple M1", 8, "14.6", "23G80", "bare metal"),
            (RUNNERS[1], "Apple M2", 10, "15.5", "24F74", "bare metal"),
        ]
    finally:
        db.close()


@pytest.mark.slow
def test_the_nightly_keeps_a_vm_s_results_but_not_its_timings(sandbox_settings, nights, capsys):
    from pipeline.__main__ import main
    from pipeline.results import device
    from tests.results.nightly_runs import RUNNERS

    results = nights.results()
    doc = {"schema": 1, "device": "mps", "torch": "2.13.0", "results": [
        {"op": "atan2", "dtype": "float32", "shape": "large", "layout": "strided",
         "elements": 1 << 20, "times": [2.0e-4, 2.1e-4, 1.9e-4]}]}  # fmt: skip
    for runner in RUNNERS[:2]:
        (results / runner / speeds.SPEED_JSON).write_text(json.dumps(doc))
    device.write(results / RUNNERS[0], recorded("m2_mini"))
    device.write(results / RUNNERS[1], recorded("vm"))
    state = ["--state-dir", str(sandbox_settings.state_dir)]
    assert main(["nightly", "--results", str(results), *state]) == 0
    capsys.readouterr()
    dashboard = sandbox_settings.state_dir / "dashboard"
    summary = json.loads((dashboard / "summary.json").read_text())
    assert summary["devices"][RUNNERS[0]]["virtualization"] == "bare metal"
    assert summary["devices"][RUNNERS[1]]["gpu"] == "Apple Paravirtual device"
    assert all(summary["devices"][r] == "unknown" for r in RUNNERS[2:])
    assert any(w.startswith(f"speed: {RUNNERS[1]}: Apple Paravirtual device is a virtual")
               for w in summary["warnings"])  # fmt: skip
    markdown = (dashboard / "summary.md").read_text()
    assert f"- {RUNNERS[0]}: Apple M2 (apple8, 10 GPU cores), macOS 15.5 (24F74)" in markdown
    assert "a VM: pass/fail kept, timings not recorded" in markdown
    page = (dashboard / "index.html").read_text()
    assert "<h2>Devices</h2>" in page and "a VM: timings not recorded" in page
    assert summary["counts"][RUNNERS[1]]  # its pass/fail results are kept
    db = history.open_read_only(sandbox_settings.state_dir / "history" / "nightly.sqlite")
    try:
        assert speeds.nightly_medians(db, recorded("m2_mini").device_class, 7) != {}
        # the VM's run is keyed by its device, and has no timings
        (virtualization, timings), = db.execute(
            "SELECT d.virtualization, (SELECT COUNT(*) FROM speed AS s "
            "WHERE s.run_id = r.id) FROM runs AS r JOIN run_devices AS d ON d.run_id = r.id "
            "WHERE r.runner = ?", (RUNNERS[1],)
        ).fetchall()  # fmt: skip
        assert (virtualization, timings) == ("paravirtual (VM)", 0)
    finally:
        db.close()


def test_speed_refuses_a_vm_s_gpu_before_timing(tmp_path):
    from pipeline.config import load_settings
    from pipeline.errors import DeviceRefusedError
    from pipeline.workspace import prepare

    settings = prepare(load_settings({"state_dir": str(tmp_path / "state")}, env={}, cwd=tmp_path))
    with pytest.raises(DeviceRefusedError, match="Apple Paravirtual device is a virtual"):
        measure(settings, ["atan2"], device="mps", probe=lambda python: recorded("vm"))
    assert not (tmp_path / "state" / "speed").exists()  # nothing was timed


def _speed_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m pipeline speed ARGS` on the bundled sandbox, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPS_PIPELINE_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    argv = [sys.executable, "-m", "pipeline", "speed", *args,
            "--state-dir", str(tmp_path / "state")]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)  # fmt: skip


def _no_mps() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (nox installs it)")
    if torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")


@pytest.mark.slow
def test_without_an_mps_device_speed_says_so_once_and_suggests_the_cpu(tmp_path):
    # issue 28: 54 warnings, "speed: 0 benchmarks on mps" and exit 0 on a machine without a Mac
    _no_mps()
    proc = _speed_cli(tmp_path)  # every default operator, on the default device
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("root: ")]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: speed: no MPS device here: torch 2.")
    assert "built without MPS" in lines[0] and sys.executable in lines[0]
    assert lines[0].endswith("to time the kernels on the CPU, pass --device cpu")
    assert proc.stdout == ""
    assert not (tmp_path / "state" / "speed" / speeds.SPEED_JSON).exists()


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_the_run_raises_the_typed_error_without_the_device(tmp_path):
    _no_mps()
    request = SpeedRequest(sys.executable, (BenchOp("atan2", "atan2", 2, ("float32",)),),
                           tmp_path, "mps", {"small": (8,)}, 0.001, 3)  # fmt: skip
    with pytest.raises(NoDeviceError) as info:
        run(request)
    assert info.value.device == "mps" and info.value.exit_code == 2
    assert "(--device cpu)" in str(info.value.suggesting("(--device cpu)"))


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@needs_torch
def test_what_the_device_cannot_run_is_said_once_per_dtype(tmp_path):
    """atan2 has no complex kernel on CPU: its five benchmarks (the 1-D shape in two layouts,
    the 2-D one in three) fail alike, said in one line; float32 is timed."""
    op = BenchOp("atan2", "atan2", 2, ("float32", "complex64"))
    request = SpeedRequest(sys.executable, (op,), tmp_path, "cpu",
                           {"small": (8,), "medium": (4, 4)}, 0.001, 3)  # fmt: skip
    result = run(request)
    assert {m.dtype for m in result.measurements} == {"float32"} and len(result.measurements) == 5
    assert len(result.errors) == 5 and {e.dtype for e in result.errors} == {"complex64"}
    (line,) = not_timed_lines(result.errors)
    assert line.startswith("atan2 complex64 (5 benchmarks): NotImplementedError: ")
    assert not_timed_lines(result.errors[:1]) == [
        f"atan2 complex64 (small contiguous): {result.errors[0].error}"
    ]


@needs_torch
@pytest.mark.slow
def test_the_speed_command_prints_its_figures(tmp_path):
    # issue 28: only the path of speed.json was printed
    proc = _speed_cli(
        tmp_path, "atan2", "--device", "cpu", "--min-run-time", "0.002", "--max-run-time", "0.01"
    )
    assert proc.returncode == 0, proc.stderr
    device, found = speeds.read(tmp_path / "state" / "speed" / speeds.SPEED_JSON)
    assert device == "cpu" and found
    title = f"Kernel speed on cpu: {len(found)} benchmarks of 1 operator"
    assert proc.stdout.splitlines()[0].rstrip() == title
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in proc.stdout.splitlines() if line.startswith("│")
    ]  # fmt: skip
    assert rows == [
        [m.op, m.dtype, m.shape, m.layout, f"{m.median * 1e6:,.1f} µs",
         f"{(m.quartiles()[1] - m.quartiles()[0]) / m.median:.1%}"]
        for m in found
    ]  # fmt: skip
    assert proc.stdout.splitlines()[-1] == SPREAD_MEANING
    assert "warning" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"speed: {len(found)} benchmarks on cpu: ")


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@needs_torch
def test_a_benchmark_stops_once_its_spread_is_small_or_at_the_cap(tmp_path):
    """Each benchmark is timed in blocks, at least ``repeats`` of them: then it stops as soon
    as their spread is under the target, or once the cap is spent; never before."""
    op = BenchOp("atan2", "atan2", 2, ("float32",))
    shapes = {"small": (8,), "medium": (4, 4)}

    def blocks(**timing) -> set[int]:
        request = SpeedRequest(sys.executable, (op,), tmp_path, "cpu", shapes, **timing)
        return {len(m.times) for m in run(request).measurements}

    # any spread is small enough: the repeats, no more
    assert blocks(min_run_time=1e-6, repeats=4, spread=float("inf")) == {4}
    # no spread is small enough, the cap spent by the first blocks: the repeats still
    assert blocks(min_run_time=1e-6, repeats=3, max_run_time=1e-6, spread=0.0) == {3}
    # no spread is small enough: blocks of 5 ms go on to the cap (0.2 s)
    assert min(blocks(min_run_time=1e-6, repeats=3, max_run_time=0.2, spread=0.0)) > 3
