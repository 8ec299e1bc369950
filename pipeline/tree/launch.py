"""Launch specs: how the host code launches a ``.metal`` file's kernels, for check-kernel.

A kernel needs its grid, threadgroup size, buffers and parameter struct, which the ``.mm``
host code computes (read from it where it follows the common patterns:
:mod:`pipeline.tree.host_launch`; an entry's own buffers and sizes win). A contributor writes
the rest (the reference, the inputs, the structs' fields) once per kernel file, in
``<state_dir>/kernels/<File>.yaml`` (``.mps-pipeline/kernels/SoftMax.yaml`` in a checkout;
the format is documented in docs/check-kernel.md). Each entry is read once here into frozen
models; every key is popped, and one left over is an error naming it.

Expressions (grid sizes, struct fields, index ranges) are Python expressions over the
case's input tensors (``x.size(0)``, ``x.stride(1)``), ``ceil_div``, ``min``, ``max`` and
``max_threads`` (the kernel's limit); they are evaluated next to torch, with the inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from pipeline.dtypes import DTYPE_TO_METAL, TORCH_ALIASES
from pipeline.errors import LaunchSpecError

SPEC_DIR = "kernels"
# the buffer name of c10/metal/error.h's ErrorMessages, which TORCH_REPORT_ERROR writes
ERROR_BUFFER = "error"
OUTPUT = "output"


class GridKind(str, Enum):
    """dispatchThreads (``threads:``) or dispatchThreadgroups (``threadgroups:``)."""

    THREADS = "threads"
    THREADGROUPS = "threadgroups"


@dataclass(frozen=True)
class TensorInput:
    """An input tensor: floating ones of the case's dtype; integer ones (an index) with values
    in ``range`` (expressions), of which one case is taken one past the end."""

    name: str
    rank: int
    dtype: str | None  # None: the case's dtype
    range: tuple[str, str] | None
    strided: bool  # also run non-contiguous views (the kernel takes strides)

    @staticmethod
    def from_yaml(name: str, data: dict[str, Any], where: str) -> TensorInput:
        rank = data.pop("rank", 1)
        dtype = data.pop("dtype", None)
        low_high = data.pop("range", None)
        strided = bool(data.pop("strided", False))
        _leftover(data, f"{where}: input {name}")
        if dtype is not None and dtype not in TORCH_ALIASES:
            raise LaunchSpecError(f"{where}: input {name}: unknown dtype {dtype!r}")
        if low_high is not None and (not isinstance(low_high, list) or len(low_high) != 2):
            raise LaunchSpecError(f"{where}: input {name}: range is [low, high)")
        if not isinstance(rank, int) or not 1 <= rank <= 4:
            raise LaunchSpecError(f"{where}: input {name}: rank is 1 to 4")
        return TensorInput(
            name,
            rank,
            TORCH_ALIASES[dtype] if dtype else None,
            (str(low_high[0]), str(low_high[1])) if low_high else None,
            strided,
        )


@dataclass(frozen=True)
class StructArg:
    """A parameter struct passed as a buffer: its C++ type and its fields' expressions (or a
    scalar's, ``constant uint& n``: ``value:``, kept as the field ""). The layout is the
    compiler's (read from the kernel's object), never written here."""

    name: str
    type: str
    fields: tuple[tuple[str, str], ...]

    @staticmethod
    def from_yaml(name: str, data: dict[str, Any], where: str) -> StructArg:
        ctype = data.pop("type", None)
        fields = data.pop("fields", {})
        if "value" in data:
            fields = {"": data.pop("value")}
        _leftover(data, f"{where}: struct {name}")
        if not isinstance(ctype, str) or not isinstance(fields, dict):
            raise LaunchSpecError(f"{where}: struct {name} needs type: and fields: {{...}}")
        return StructArg(name, ctype, tuple((str(k), str(v)) for k, v in fields.items()))


@dataclass(frozen=True)
class LaunchCase:
    """One kernel (or a family: ``{T}`` in the name runs over ``dtypes``) and its launch."""

    kernel: str
    dtypes: tuple[str, ...]
    reference: str  # a torch expression over the inputs, run on CPU
    opinfo: str | None  # its samples' values feed the first input too
    inputs: tuple[TensorInput, ...]
    output_like: str  # the input whose shape the (contiguous) output has
    output_dtype: str | None
    # the output's shape (expressions) when it is no input's; else torch's result's, and
    # ``output_like``'s when torch refuses the input
    output_shape: tuple[str, ...] | None
    # input, struct, "output" or "error" names, by buffer index; () for the host code's
    buffers: tuple[str, ...]
    structs: tuple[StructArg, ...]
    grid_kind: GridKind | None  # None, with grid (), for the host code's
    grid: tuple[str, ...]  # 3 expressions, or () for the host code's
    threads_per_threadgroup: tuple[str, ...]  # 3 expressions, or () for the host code's
    output_host: str = OUTPUT  # the output's variable in the host code
    launch_from: str | None = None  # the host code the launch was read from (File.mm:LINE)

    @property
    def launched(self) -> bool:
        """Whether buffers, grid and threadgroup size are all known."""
        return bool(self.buffers and self.grid and self.threads_per_threadgroup)

    def host_name(self, dtype: str) -> str:
        return self.kernel.replace("{T}", DTYPE_TO_METAL.get(dtype, dtype))

    @staticmethod
    def from_yaml(data: dict[str, Any], where: str) -> LaunchCase:
        kernel = data.pop("kernel", None)
        if not isinstance(kernel, str):
            raise LaunchSpecError(f"{where}: an entry needs kernel: HOST_NAME")
        where = f"{where}: {kernel}"
        dtypes = tuple(TORCH_ALIASES.get(d, d) for d in data.pop("dtypes", ["float32"]))
        reference = data.pop("reference", None)
        opinfo = data.pop("opinfo", None)
        inputs = data.pop("inputs", {})
        output = data.pop("output", {})
        buffers = data.pop("buffers", None)
        structs = data.pop("structs", {})
        threads = data.pop("threads", None)
        groups = data.pop("threadgroups", None)
        tptg = data.pop("threads_per_threadgroup", None)
        _leftover(data, where)
        if not isinstance(reference, str) or not isinstance(buffers, list | None):
            raise LaunchSpecError(f"{where}: reference: is required, buffers: a list")
        if threads is not None and groups is not None:
            raise LaunchSpecError(f"{where}: give threads: or threadgroups:, not both")
        parsed_inputs = tuple(
            TensorInput.from_yaml(str(k), dict(v or {}), where) for k, v in inputs.items()
        )
        names = {i.name for i in parsed_inputs}
        like = str(output.pop("like", parsed_inputs[0].name if parsed_inputs else ""))
        out_dtype = output.pop("dtype", None)
        out_shape = output.pop("shape", None)
        out_host = str(output.pop("host", OUTPUT))
        _leftover(output, f"{where}: output")
        parsed_structs = tuple(
            StructArg.from_yaml(str(k), dict(v or {}), where) for k, v in structs.items()
        )
        known = names | {s.name for s in parsed_structs} | {OUTPUT, ERROR_BUFFER}
        unknown = [b for b in buffers or () if b not in known]
        if unknown or like not in names:
            raise LaunchSpecError(
                f"{where}: buffers name inputs, structs, output or error ({', '.join(unknown)} "
                f"is none), and output.like an input"
            )
        return LaunchCase(
            kernel, dtypes, reference, opinfo, parsed_inputs, like,
            TORCH_ALIASES[out_dtype] if out_dtype else None,
            tuple(str(s) for s in out_shape) if isinstance(out_shape, list) else None,
            tuple(str(b) for b in buffers or ()), parsed_structs,
            GridKind.THREADS if threads is not None else
            GridKind.THREADGROUPS if groups is not None else None,
            _three(threads if threads is not None else groups, where),
            _three(tptg, where), out_host,
        )  # fmt: skip


@dataclass(frozen=True)
class LaunchSpec:
    path: Path
    cases: tuple[LaunchCase, ...]

    def find(self, host_name: str) -> tuple[LaunchCase, str] | None:
        """The entry and dtype launching ``host_name``."""
        for case in self.cases:
            for dtype in case.dtypes:
                if case.host_name(dtype) == host_name:
                    return case, dtype
        return None


def _three(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()  # the host code's
    if not isinstance(value, list) or not 1 <= len(value) <= 3:
        raise LaunchSpecError(f"{where}: a size is a list of 1 to 3 expressions")
    padded = [str(v) for v in value] + ["1"] * (3 - len(value))
    return (padded[0], padded[1], padded[2])


def _leftover(data: Mapping[str, Any], where: str) -> None:
    if data:
        raise LaunchSpecError(f"{where}: unknown key(s) {', '.join(map(str, data))}")


def spec_path(spec_dir: Path, metal: Path) -> Path:
    return spec_dir / f"{metal.stem}.yaml"


def read_spec(path: Path) -> LaunchSpec:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise LaunchSpecError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels", []), list):
        raise LaunchSpecError(f"{path}: a launch spec is {{kernels: [entries]}}")
    entries = doc.pop("kernels", [])
    _leftover(doc, str(path))
    return LaunchSpec(path, tuple(LaunchCase.from_yaml(dict(e), str(path)) for e in entries))
