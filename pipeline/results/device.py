"""Which device a runner's results came from: chip, GPU and its family, macOS and its build,
Metal, and whether the GPU is a virtual machine's paravirtual one.

A macOS VM's GPU ("Apple Paravirtual device") passes or fails tests like a Mac's, but its
timings are not a Mac mini's. The test run writes ``device.json`` next to each runner's
results (``<results>/<runner>/device.json``), read on the Mac from what
:mod:`pipeline.run.device` runs:

- ``system_profiler -json SPDisplaysDataType``: the GPU's model (``sppci_model``), its cores
  (``sppci_cores``) and Metal support (``spdisplays_mtlgpufamilysupport``:
  ``spdisplays_metal3``);
- ``sysctl machdep.cpu.brand_string kern.osproductversion kern.osversion
  kern.hv_vmm_present``: the chip, macOS and its build, and whether macOS runs under a
  hypervisor (1);
- ``torch.backends.mps.get_name()``: the device torch's MPS backend uses.

What none of them says is "unknown", never guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TypedDict, cast

from pipeline.errors import DocumentError, PipelineError
from pipeline.fields import dump
from pipeline.fields import read as read_model
from pipeline.fsio import write_atomic

DEVICE_JSON = "device.json"  # in a runner's results folder, beside its JUnit reports
UNKNOWN = "unknown"
PARAVIRTUAL_GPU = "Apple Paravirtual device"
SYSCTL_KEYS = (
    "machdep.cpu.brand_string",
    "kern.osproductversion",
    "kern.osversion",
    "kern.hv_vmm_present",
)
# Apple's Metal feature-set tables: the GPU family of each Apple-silicon generation
_FAMILIES = {"M1": "apple7", "M2": "apple8", "M3": "apple9", "M4": "apple9"}
_CHIP = re.compile(r"\bApple (M\d+)\b")
_SYSCTL_LINE = re.compile(r"^([\w.]+): (.*)$")
_METAL = re.compile(r"^spdisplays_metal(\d+)$")


class Virtualization(Enum):
    BARE_METAL = "bare metal"
    PARAVIRTUAL = "paravirtual (VM)"
    UNKNOWN = UNKNOWN

    @classmethod
    def parse(cls, text: str) -> Virtualization:
        """The member whose value is ``text``; ValueError for anything else."""
        return cls(text)


@dataclass(frozen=True)
class DeviceClass:
    """The devices whose kernel timings are comparable: one chip with as many GPU cores, on
    one macOS major version, on bare metal.

    The chip and its GPU cores set the hardware (``machdep.cpu.brand_string`` says "Apple
    M2" of an M2 Pro too: the cores tell them apart). The GPU family is left out: it follows
    from the chip (Apple's tables), and a chip newer than our table would have an unknown
    one and never be compared. macOS's major version is in, because Metal's compiler, MPS
    and MPSGraph ship with the OS and a major release moves kernel timings; its build and
    minor version are not, or every point update would leave a runner without a baseline
    for ``speed.min_nights`` nights. A VM's GPU, or a machine not known to be bare metal,
    has no class: its timings are never compared (:func:`refuse_timings`).
    """

    chip: str
    gpu_cores: int | None
    macos_major: str
    virtualization: Virtualization

    @property
    def unknown(self) -> tuple[str, ...]:
        """Why the class is not known ("chip unknown", "a VM"); empty: it is."""
        lacking = [
            f"{name} unknown"
            for name, value in (("chip", self.chip), ("GPU cores", self.gpu_cores),
                                ("macOS", self.macos_major))
            if value in (None, UNKNOWN, "")
        ]  # fmt: skip
        if self.virtualization is Virtualization.PARAVIRTUAL:
            lacking.append("a VM")
        elif self.virtualization is Virtualization.UNKNOWN:
            lacking.append("bare metal or VM unknown")
        return tuple(lacking)

    @property
    def known(self) -> bool:
        return not self.unknown

    def __str__(self) -> str:
        if self.unknown:
            return f"an unknown device class ({', '.join(self.unknown)})"
        return f"{self.chip}, {self.gpu_cores} GPU cores, macOS {self.macos_major}"


class DeviceJson(TypedDict):
    chip: str
    gpu: str
    gpu_family: str
    gpu_cores: int | None
    macos: str
    macos_build: str
    metal: str
    virtualization: str


@dataclass(frozen=True)
class Device:
    """One runner's device, as ``device.json`` holds it."""

    chip: str  # "Apple M2"
    gpu: str  # "Apple M2", "Apple Paravirtual device"
    gpu_family: str  # "apple8"
    gpu_cores: int | None
    macos: str  # "15.5"
    macos_build: str  # "24F74"
    metal: str  # "Metal 3"
    virtualization: Virtualization

    @property
    def paravirtual(self) -> bool:
        return self.virtualization is Virtualization.PARAVIRTUAL

    @property
    def device_class(self) -> DeviceClass:
        """What its timings may be compared within (:class:`DeviceClass`)."""
        return DeviceClass(self.chip, self.gpu_cores, self.macos.split(".")[0], self.virtualization)

    def label(self) -> str:
        cores = f", {self.gpu_cores} GPU cores" if self.gpu_cores else ""
        gpu = self.chip if self.gpu == self.chip else f"{self.chip}, GPU {self.gpu}"
        return (
            f"{gpu} ({self.gpu_family}{cores}), macOS {self.macos} ({self.macos_build}), "
            f"{self.metal}, {self.virtualization.value}"
        )

    @classmethod
    def from_outputs(
        cls, profiler_json: str | None, sysctl: str | None, torch_name: str | None = None
    ) -> Device:
        """From the recorded outputs of the commands (None: the command could not run)."""
        gpu, cores, metal = _displays(profiler_json)
        values = _sysctl(sysctl)
        torch_name = (torch_name or "").strip()
        gpu = gpu if gpu != UNKNOWN else (torch_name or UNKNOWN)
        chip_match = _CHIP.search(values.brand) or _CHIP.search(gpu)
        chip = f"Apple {chip_match[1]}" if chip_match else UNKNOWN
        if PARAVIRTUAL_GPU in (gpu, torch_name) or values.vmm == "1":
            virtualization = Virtualization.PARAVIRTUAL
        elif values.vmm == "0":
            virtualization = Virtualization.BARE_METAL
        else:
            virtualization = Virtualization.UNKNOWN
        family = UNKNOWN
        if chip_match and virtualization is not Virtualization.PARAVIRTUAL:
            family = _FAMILIES.get(chip_match[1], UNKNOWN)
        return cls(
            chip=chip,
            gpu=gpu,
            gpu_family=family,
            gpu_cores=cores,
            macos=values.os_version or UNKNOWN,
            macos_build=values.os_build or UNKNOWN,
            metal=metal,
            virtualization=virtualization,
        )

    def to_dict(self) -> DeviceJson:
        return cast(DeviceJson, dump(self))

    @classmethod
    def from_dict(cls, data: object, where: str) -> Device:
        """``device.json``'s document; PipelineError naming ``where`` for anything else."""
        if not isinstance(data, dict):
            raise PipelineError(f"{where}: not a device record (a JSON object)")
        try:
            return read_model(cls, data, where)
        except DocumentError as exc:
            raise PipelineError(
                f"{where}: not a device record ({exc.where} {exc.problem})"
            ) from None


@dataclass(frozen=True)
class _Display:
    """What ``system_profiler SPDisplaysDataType -json`` says of one GPU, in Apple's keys
    (:data:`_DISPLAY_KEYS`); any of them may be missing (None), and of any type."""

    model: object = None  # "Apple M2"
    name: object = None  # the same, where there is no model
    cores: object = None  # GPU cores, "10"
    metal: object = None  # "spdisplays_metal3"


_DISPLAY_KEYS = {
    "sppci_model": "model",
    "_name": "name",
    "sppci_cores": "cores",
    "spdisplays_mtlgpufamilysupport": "metal",
}


def _displays(text: str | None) -> tuple[str, int | None, str]:
    """(GPU model, cores, Metal support) of the first GPU system_profiler lists."""
    try:
        items = json.loads(text or "{}").get("SPDisplaysDataType") or []
    except (ValueError, AttributeError):
        items = []
    gpus = [i for i in items if isinstance(i, dict)]
    if not gpus:
        return UNKNOWN, None, UNKNOWN
    gpu = _Display(
        **{field: gpus[0][key] for key, field in _DISPLAY_KEYS.items() if key in gpus[0]}
    )
    cores = str(gpu.cores if gpu.cores is not None else "")
    support = _METAL.match(str(gpu.metal if gpu.metal is not None else ""))
    return (
        str(gpu.model or gpu.name or UNKNOWN),
        int(cores) if cores.isdigit() else None,
        (f"Metal {support[1]}" if support else UNKNOWN),
    )


@dataclass(frozen=True)
class _Sysctl:
    """What ``sysctl NAME...`` said of the names a device is told by ("": nothing, as for a
    name this macOS does not know)."""

    brand: str = ""  # machdep.cpu.brand_string: "Apple M2" (of an M2 Pro too)
    vmm: str = ""  # kern.hv_vmm_present: "1" in a virtual machine, "0" on bare metal
    os_version: str = ""  # kern.osproductversion: "15.5"
    os_build: str = ""  # kern.osversion: "24F74"


_SYSCTL_NAMES = {
    "machdep.cpu.brand_string": "brand",
    "kern.hv_vmm_present": "vmm",
    "kern.osproductversion": "os_version",
    "kern.osversion": "os_build",
}


def _sysctl(text: str | None) -> _Sysctl:
    """The ``name: value`` lines of ``sysctl NAME...`` read into :class:`_Sysctl`."""
    said: dict[str, str] = {}
    for line in (text or "").splitlines():
        match = _SYSCTL_LINE.match(line.strip())
        if match and (field := _SYSCTL_NAMES.get(match[1])):
            said[field] = match[2].strip()
    return _Sysctl(**said)


def write(folder: Path, device: Device) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DEVICE_JSON
    write_atomic(path, json.dumps(device.to_dict(), indent=1) + "\n")
    return path


def read(folder: Path) -> Device | None:
    """The device recorded in ``folder`` (a runner's results), None when none was
    recorded; PipelineError when the file is not a device record."""
    path = folder / DEVICE_JSON
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PipelineError(f"{path}: cannot read it as JSON ({exc})") from None
    return Device.from_dict(data, str(path))


def refuse_timings(device: Device | None) -> str | None:
    """Why timings from ``device`` are not kept (a VM's GPU), None when they may be."""
    if device is not None and device.paravirtual:
        return (
            f"{device.gpu} is a virtual machine's GPU ({device.virtualization.value}): "
            "its timings are not a Mac's, so they are neither recorded nor compared"
        )
    return None
