"""Launch specs: how the host code launches a ``.metal`` file's kernels, for check-kernel.

A kernel needs its grid, threadgroup size, buffers and parameter struct, which the ``.mm``
host code computes (read from it where it follows the common patterns:
:mod:`pipeline.tree.host_launch`; an entry's own buffers and sizes win). A contributor writes
the rest (the reference, the inputs, the structs' fields) once per kernel file, in
``<state_dir>/kernels/<File>.yaml`` (``.mps-pipeline/kernels/SoftMax.yaml`` in a checkout;
the format is documented in docs/check-kernel.md). Each entry is read once here, by
:func:`pipeline.fields.read`, into models of the spec as written (a key none names is an
error naming it), and from those into the frozen models below.

Expressions (grid sizes, struct fields, index ranges) are Python expressions over the
case's input tensors (``x.size(0)``, ``x.stride(1)``), ``ceil_div``, ``min``, ``max`` and
``max_threads`` (the kernel's limit); they are evaluated next to torch, with the inputs.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import TypeVar

import yaml

from pipeline.dtypes import DTYPE_TO_METAL, TORCH_ALIASES
from pipeline.errors import DocumentError, LaunchSpecError
from pipeline.fields import read

SPEC_DIR = "kernels"
# the buffer name of c10/metal/error.h's ErrorMessages, which TORCH_REPORT_ERROR writes
ERROR_BUFFER = "error"
OUTPUT = "output"
D = TypeVar("D")


class GridKind(str, Enum):
    """dispatchThreads (``threads:``) or dispatchThreadgroups (``threadgroups:``)."""

    THREADS = "threads"
    THREADGROUPS = "threadgroups"


# an expression: YAML reads ``256`` or ``0.5`` as a number, ``x.size(0)`` as a string
_EXPR = (str, int, float)


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
    def from_spec(name: str, data: object, doc: str, where: str, said: str) -> TensorInput:
        at = f"{said}: input {name}"
        if data is None:  # ``x:`` alone: every default
            return TensorInput(name, 1, None, None, False)
        spec = _read(_InputSpec, data, doc, where, at)
        dtype, low_high = spec.dtype, _expressions(spec.range, doc, f"{where}.range")
        if dtype is not None and dtype not in TORCH_ALIASES:
            raise LaunchSpecError(f"{at}: unknown dtype {dtype!r}")
        if low_high is not None and len(low_high) != 2:
            raise LaunchSpecError(f"{at}: range is [low, high)")
        rank = 1 if spec.rank is None else spec.rank
        if not 1 <= rank <= 4:
            raise LaunchSpecError(f"{at}: rank is 1 to 4")
        return TensorInput(
            name,
            rank,
            TORCH_ALIASES[dtype] if dtype else None,
            (low_high[0], low_high[1]) if low_high else None,
            bool(spec.strided),
        )


@dataclass(frozen=True)
class _InputSpec:
    """An entry's ``inputs: {name: ...}`` as written."""

    rank: int | None = None
    dtype: str | None = None
    range: tuple[object, ...] | None = None  # expressions
    strided: bool | None = None


@dataclass(frozen=True)
class StructArg:
    """A parameter struct passed as a buffer: its C++ type and its fields' expressions (or a
    scalar's, ``constant uint& n``: ``value:``, kept as the field ""). The layout is the
    compiler's (read from the kernel's object), never written here."""

    name: str
    type: str
    fields: tuple[tuple[str, str], ...]

    @staticmethod
    def from_spec(name: str, data: object, doc: str, where: str, said: str) -> StructArg:
        at = f"{said}: struct {name}"
        spec = None if data is None else _read(_StructSpec, data, doc, where, at)
        if spec is None or spec.type is None:
            raise LaunchSpecError(f"{at} needs type: and fields: {{...}}")
        if spec.value is not None:
            if spec.fields is not None:
                raise LaunchSpecError(f"{at}: unknown key(s) fields")
            return StructArg(name, spec.type, (("", str(spec.value)),))
        named = spec.fields or {}
        fields = tuple((k, _expression(v, doc, f"{where}.fields.{k}")) for k, v in named.items())
        return StructArg(name, spec.type, fields)


@dataclass(frozen=True)
class _StructSpec:
    """An entry's ``structs: {name: ...}`` as written: a struct's fields, or a scalar's
    value."""

    type: str | None = None
    value: str | int | float | None = None
    fields: dict[str, object] | None = None  # expressions


@dataclass(frozen=True)
class LaunchOutput:
    """An entry's ``output:``: the input whose shape it has, its dtype and shape when they
    are not torch's result's, and its variable in the host code."""

    like: str | None  # None: the first input
    dtype: str | None
    shape: tuple[str, ...] | None
    host: str

    @staticmethod
    def from_spec(data: object, doc: str, where: str, said: str) -> LaunchOutput:
        if data is None:
            return LaunchOutput(None, None, None, OUTPUT)
        spec = _read(_OutputSpec, data, doc, where, f"{said}: output")
        if spec.dtype is not None and spec.dtype not in TORCH_ALIASES:
            raise LaunchSpecError(f"{said}: output: unknown dtype {spec.dtype!r}")
        shape = _expressions(spec.shape, doc, f"{where}.shape")
        return LaunchOutput(spec.like, spec.dtype, shape, spec.host or OUTPUT)


@dataclass(frozen=True)
class _OutputSpec:
    """An entry's ``output:`` as written."""

    like: str | None = None
    dtype: str | None = None
    shape: tuple[object, ...] | None = None  # expressions
    host: str | None = None


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
    def from_spec(data: object, doc: str, where: str) -> LaunchCase:
        spec, unknown = _read_known(_EntrySpec, data, doc, where)
        if spec.kernel is None:
            raise LaunchSpecError(f"{doc}: an entry needs kernel: HOST_NAME")
        said = f"{doc}: {spec.kernel}"
        if unknown:
            raise LaunchSpecError(f"{said}: unknown key(s) {', '.join(unknown)}")
        named = spec.dtypes
        dtypes = tuple(TORCH_ALIASES.get(d, d) for d in (("float32",) if named is None else named))
        threads = _expressions(spec.threads, doc, f"{where}.threads")
        groups = _expressions(spec.threadgroups, doc, f"{where}.threadgroups")
        tptg = _expressions(spec.threads_per_threadgroup, doc, f"{where}.threads_per_threadgroup")
        if spec.reference is None:
            raise LaunchSpecError(f"{said}: reference: is required, buffers: a list")
        if threads is not None and groups is not None:
            raise LaunchSpecError(f"{said}: give threads: or threadgroups:, not both")
        parsed_inputs = tuple(
            TensorInput.from_spec(k, v, doc, f"{where}.inputs.{k}", said)
            for k, v in (spec.inputs or {}).items()
        )
        names = {i.name for i in parsed_inputs}
        out = LaunchOutput.from_spec(spec.output, doc, f"{where}.output", said)
        like = out.like if out.like is not None else parsed_inputs[0].name if parsed_inputs else ""
        parsed_structs = tuple(
            StructArg.from_spec(k, v, doc, f"{where}.structs.{k}", said)
            for k, v in (spec.structs or {}).items()
        )
        known = names | {s.name for s in parsed_structs} | {OUTPUT, ERROR_BUFFER}
        unknown_buffers = [b for b in spec.buffers or () if b not in known]
        if unknown_buffers or like not in names:
            raise LaunchSpecError(
                f"{said}: buffers name inputs, structs, output or error "
                f"({', '.join(unknown_buffers)} is none), and output.like an input"
            )
        return LaunchCase(
            spec.kernel, dtypes, spec.reference, spec.opinfo, parsed_inputs, like,
            TORCH_ALIASES[out.dtype] if out.dtype else None, out.shape,
            spec.buffers or (), parsed_structs,
            GridKind.THREADS if threads is not None else
            GridKind.THREADGROUPS if groups is not None else None,
            _three(threads if threads is not None else groups, said),
            _three(tptg, said), out.host,
        )  # fmt: skip


@dataclass(frozen=True)
class _EntrySpec:
    """One entry of a launch spec's ``kernels:`` as written (docs/check-kernel.md)."""

    kernel: str | None = None
    dtypes: tuple[str, ...] | None = None
    reference: str | None = None
    opinfo: str | None = None
    inputs: dict[str, object] | None = None  # name -> _InputSpec, or null for every default
    output: object = None  # _OutputSpec, or null
    buffers: tuple[str, ...] | None = None
    structs: dict[str, object] | None = None  # name -> _StructSpec
    threads: tuple[object, ...] | None = None  # expressions, as are the sizes below
    threadgroups: tuple[object, ...] | None = None
    threads_per_threadgroup: tuple[object, ...] | None = None


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


def _read_known(kind: type[D], data: object, doc: str, where: str) -> tuple[D, list[str]]:
    """The ``kind`` the mapping ``data`` holds, and the keys it does not name (a
    hand-written file: its caller says them in the spec's own words)."""
    known = {f.name for f in fields(typing.cast(type, kind))}
    unknown = []
    if isinstance(data, dict):  # else read refuses it: not a mapping
        unknown = [str(k) for k in data if k not in known]
        data = {k: v for k, v in data.items() if k in known}
    return read(kind, data, doc, where), unknown


def _read(kind: type[D], data: object, doc: str, where: str, said: str) -> D:
    """The ``kind`` the mapping ``data`` holds; a key it does not name is an error ``said``
    where it is."""
    found, unknown = _read_known(kind, data, doc, where)
    if unknown:
        raise LaunchSpecError(f"{said}: unknown key(s) {', '.join(unknown)}")
    return found


def _expression(item: object, doc: str, where: str) -> str:
    """An expression (a number as YAML read it, written back)."""
    if isinstance(item, bool) or not isinstance(item, _EXPR):
        raise DocumentError(doc, where, f"is {item!r}, not an expression (a string or a number)")
    return str(item)


def _expressions(items: tuple[object, ...] | None, doc: str, where: str) -> tuple[str, ...] | None:
    """The list of expressions at ``where``, or None."""
    if items is None:
        return None
    return tuple(_expression(item, doc, f"{where}[{i}]") for i, item in enumerate(items))


def _three(value: tuple[str, ...] | None, where: str) -> tuple[str, ...]:
    if value is None:
        return ()  # the host code's
    if not 1 <= len(value) <= 3:
        raise LaunchSpecError(f"{where}: a size is a list of 1 to 3 expressions")
    padded = [*value, *["1"] * (3 - len(value))]
    return (padded[0], padded[1], padded[2])


def spec_path(spec_dir: Path, metal: Path) -> Path:
    return spec_dir / f"{metal.stem}.yaml"


def read_spec(path: Path) -> LaunchSpec:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise LaunchSpecError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise LaunchSpecError(f"{path}: a launch spec is {{kernels: [entries]}}")
    try:
        spec = _read(_SpecFile, doc, str(path), "", str(path))
        return LaunchSpec(
            path,
            tuple(
                LaunchCase.from_spec(e, str(path), f"kernels[{i}]")
                for i, e in enumerate(spec.kernels)
            ),
        )
    except DocumentError as exc:  # a hand-written file: said as the spec's error, not a tool's
        raise LaunchSpecError(f"{path}: {exc.where} {exc.problem}") from None


@dataclass(frozen=True)
class _SpecFile:
    kernels: tuple[object, ...] = ()  # entries (_EntrySpec)
