"""Device provenance from recorded outputs of system_profiler and sysctl (our own
fixtures in the commands' formats): a Mac mini's M2 and a macOS VM's paravirtual GPU."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.errors import PipelineError
from pipeline.results import device
from pipeline.results.device import Device, Virtualization

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "device"


def recorded(name: str, torch_name: str | None = None) -> Device:
    return Device.from_outputs(
        (FIXTURES / f"{name}.system_profiler.json").read_text(),
        (FIXTURES / f"{name}.sysctl.txt").read_text(),
        torch_name,
    )


def mac(runner: str) -> Device:
    """The bare-metal Mac of one of the sandbox's runner configurations (macos-m1-14,
    macos-m2-15, macos-m2-26): the recorded M2 mini, its chip and macOS changed."""
    mini = recorded("m2_mini")
    if runner == "macos-m1-14":
        return replace(mini, chip="Apple M1", gpu="Apple M1", gpu_family="apple7", gpu_cores=8,
                       macos="14.6", macos_build="23G80")  # fmt: skip
    if runner == "macos-m2-26":
        return replace(mini, macos="26.0", macos_build="25A354")
    assert runner == "macos-m2-15", runner
    return mini


def test_a_mac_mini() -> None:
    mini = recorded("m2_mini", torch_name="Apple M2\n")
    assert mini == Device(
        "Apple M2", "Apple M2", "apple8", 10, "15.5", "24F74", "Metal 3", Virtualization.BARE_METAL
    )
    assert mini.label() == (
        "Apple M2 (apple8, 10 GPU cores), macOS 15.5 (24F74), Metal 3, bare metal"
    )
    assert device.refuse_timings(mini) is None


def test_a_paravirtual_device_is_a_vm_and_its_timings_are_refused() -> None:
    vm = recorded("vm", torch_name="Apple Paravirtual device")
    assert vm.paravirtual and vm.gpu == "Apple Paravirtual device"
    assert (vm.chip, vm.macos, vm.macos_build, vm.metal) == ("Apple M1", "14.6", "23G80", "Metal 3")
    assert vm.gpu_family == "unknown"  # a paravirtual GPU is no Apple-silicon family
    assert vm.device_class != recorded("m2_mini").device_class
    reason = device.refuse_timings(vm)
    assert reason is not None and "Apple Paravirtual device" in reason


def test_the_gpu_name_alone_marks_a_vm() -> None:
    vm = Device.from_outputs((FIXTURES / "vm.system_profiler.json").read_text(), None)
    assert vm.virtualization is Virtualization.PARAVIRTUAL
    assert (vm.chip, vm.macos) == ("unknown", "unknown")


def test_nothing_recorded_is_unknown_never_guessed() -> None:
    nothing = Device.from_outputs(None, None)
    assert nothing.virtualization is Virtualization.UNKNOWN
    assert {nothing.chip, nothing.gpu, nothing.gpu_family, nothing.metal} == {"unknown"}
    assert device.refuse_timings(nothing) is None


def test_device_json_round_trip_and_damage(tmp_path: Path) -> None:
    mini = recorded("m2_mini")
    device.write(tmp_path / "macos-m2-15", mini)
    assert device.read(tmp_path / "macos-m2-15") == mini
    assert device.read(tmp_path / "macos-m1-14") is None  # none recorded
    (tmp_path / "macos-m2-15" / device.DEVICE_JSON).write_text('{"chip": "Apple M2"}')
    with pytest.raises(PipelineError, match="not a device record"):
        device.read(tmp_path / "macos-m2-15")


def test_the_pr_comment_says_which_device_the_tests_ran_on() -> None:
    from pipeline.report.pr import PrResults
    from tests.report.pr_samples import sample

    vm = recorded("vm")
    results = sample(device=vm)
    body = results.comment().replace("\\", "")  # the label's Markdown escapes
    assert f"Tested on {vm.label()} (a VM: its timings are not a Mac's)." in body
    assert PrResults.from_json(results.to_json(), 7).device == vm
    assert "Tested on" not in sample().comment()  # off a Mac: nothing said


def test_the_device_class_is_chip_gpu_cores_and_macos_major_on_bare_metal() -> None:
    mini = recorded("m2_mini")
    assert str(mini.device_class) == "Apple M2, 10 GPU cores, macOS 15"
    # a point release and another build of the same macOS: the same class
    assert replace(mini, macos="15.6", macos_build="24G84").device_class == mini.device_class
    # another macOS major, another chip, an M2 Pro (the brand string says "Apple M2" of it
    # too: its cores tell it apart): other classes
    for other in (mac("macos-m2-26"), mac("macos-m1-14"), replace(mini, gpu_cores=19)):
        assert other.device_class != mini.device_class and other.device_class.known
    vm = recorded("vm")
    assert not vm.device_class.known and "a VM" in str(vm.device_class)
    nothing = Device.from_outputs(None, None).device_class
    assert str(nothing) == (
        "an unknown device class (chip unknown, GPU cores unknown, macOS unknown, "
        "bare metal or VM unknown)"
    )
    # not known to be bare metal: no class, whatever else is known
    unsure = replace(mini, virtualization=Virtualization.UNKNOWN).device_class
    assert unsure.unknown == ("bare metal or VM unknown",)


def test_a_device_record_names_the_field_that_does_not_read(tmp_path: Path) -> None:
    record = recorded("m2_mini").to_dict()
    for change, said in [
        ({"gpu_cores": "10"}, "gpu_cores must be int or null, got str"),
        ({"virtualization": "bare"}, "virtualization is 'bare', not one of"),
        ({"ram": 16}, r"the top level has unknown key\(s\) 'ram'"),
    ]:
        (tmp_path / device.DEVICE_JSON).write_text(json.dumps({**record, **change}))
        with pytest.raises(PipelineError, match=f"not a device record \\({said}"):
            device.read(tmp_path)
