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

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import yaml

from pipeline.dtypes import DTYPE_TO_METAL, TORCH_ALIASES
from pipeline.errors import DocumentError, LaunchSpecError
from pipeline.fields import Fields

SPEC_DIR = "kernels"
# the buffer name of c10/metal/error.h's ErrorMessages, which TORCH_REPORT_ERROR writes
ERROR_BUFFER = "error"
OUTPUT = "output"


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
    def from_fields(name: str, f: Fields | None, where: str) -> TensorInput:
        at = f"{where}: input {name}"
        if f is None:  # ``x:`` alone: every default
            return TensorInput(name, 1, None, None, False)
        rank = f.pop("rank", int, type(None))
        dtype = f.pop("dtype", str, type(None))
        low_high = _expressions(f, "range")
        strided = bool(f.pop("strided", bool, type(None)))
        _leftover(f, at)
        if dtype is not None and dtype not in TORCH_ALIASES:
            raise LaunchSpecError(f"{at}: unknown dtype {dtype!r}")
        if low_high is not None and len(low_high) != 2:
            raise LaunchSpecError(f"{at}: range is [low, high)")
        rank = 1 if rank is None else rank
        if not 1 <= rank <= 4:
            raise LaunchSpecError(f"{at}: rank is 1 to 4")
        return TensorInput(
            name,
            rank,
            TORCH_ALIASES[dtype] if dtype else None,
            (low_high[0], low_high[1]) if low_high else None,
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
    def from_fields(name: str, f: Fields | None, where: str) -> StructArg:
        at = f"{where}: struct {name}"
        if f is None:
            raise LaunchSpecError(f"{at} needs type: and fields: {{...}}")
        ctype = f.pop("type", str, type(None))
        if "value" in f.names():
            fields: tuple[tuple[str, str], ...] = (("", str(f.pop("value", str, int, float))),)
        else:
            named = f.obj_or_none("fields")
            fields = () if named is None else tuple(
                (k, str(named.pop(k, *_EXPR))) for k in named.names()
            )  # fmt: skip
        _leftover(f, at)
        if ctype is None:
            raise LaunchSpecError(f"{at} needs type: and fields: {{...}}")
        return StructArg(name, ctype, fields)


@dataclass(frozen=True)
class LaunchOutput:
    """An entry's ``output:``: the input whose shape it has, its dtype and shape when they
    are not torch's result's, and its variable in the host code."""

    like: str | None  # None: the first input
    dtype: str | None
    shape: tuple[str, ...] | None
    host: str

    @staticmethod
    def from_fields(f: Fields | None, where: str) -> LaunchOutput:
        if f is None:
            return LaunchOutput(None, None, None, OUTPUT)
        found = LaunchOutput(
            like=f.pop("like", str, type(None)),
            dtype=f.pop("dtype", str, type(None)),
            shape=_expressions(f, "shape"),
            host=f.pop("host", str, type(None)) or OUTPUT,
        )
        _leftover(f, f"{where}: output")
        if found.dtype is not None and found.dtype not in TORCH_ALIASES:
            raise LaunchSpecError(f"{where}: output: unknown dtype {found.dtype!r}")
        return found


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
    def from_fields(f: Fields, where: str) -> LaunchCase:
        kernel = f.pop("kernel", str, type(None))
        if kernel is None:
            raise LaunchSpecError(f"{where}: an entry needs kernel: HOST_NAME")
        where = f"{where}: {kernel}"
        named = f.strings_or_none("dtypes")
        dtypes = tuple(TORCH_ALIASES.get(d, d) for d in (("float32",) if named is None else named))
        reference = f.pop("reference", str, type(None))
        opinfo = f.pop("opinfo", str, type(None))
        inputs = f.obj_or_none("inputs")
        output = f.obj_or_none("output")
        buffers = f.strings_or_none("buffers")
        structs = f.obj_or_none("structs")
        threads = _expressions(f, "threads")
        groups = _expressions(f, "threadgroups")
        tptg = _expressions(f, "threads_per_threadgroup")
        _leftover(f, where)
        if reference is None:
            raise LaunchSpecError(f"{where}: reference: is required, buffers: a list")
        if threads is not None and groups is not None:
            raise LaunchSpecError(f"{where}: give threads: or threadgroups:, not both")
        parsed_inputs = tuple(TensorInput.from_fields(k, v, where) for k, v in _by_name(inputs))
        names = {i.name for i in parsed_inputs}
        out = LaunchOutput.from_fields(output, where)
        like = out.like if out.like is not None else parsed_inputs[0].name if parsed_inputs else ""
        parsed_structs = tuple(StructArg.from_fields(k, v, where) for k, v in _by_name(structs))
        known = names | {s.name for s in parsed_structs} | {OUTPUT, ERROR_BUFFER}
        unknown = [b for b in buffers or () if b not in known]
        if unknown or like not in names:
            raise LaunchSpecError(
                f"{where}: buffers name inputs, structs, output or error ({', '.join(unknown)} "
                f"is none), and output.like an input"
            )
        return LaunchCase(
            kernel, dtypes, reference, opinfo, parsed_inputs, like,
            TORCH_ALIASES[out.dtype] if out.dtype else None, out.shape,
            buffers or (), parsed_structs,
            GridKind.THREADS if threads is not None else
            GridKind.THREADGROUPS if groups is not None else None,
            _three(threads if threads is not None else groups, where),
            _three(tptg, where), out.host,
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


def _by_name(f: Fields | None) -> list[tuple[str, Fields | None]]:
    """An object keyed by names (``inputs:``, ``structs:``): each name's object, None for
    null (``x:`` alone)."""
    return [] if f is None else [(name, f.obj_or_none(name)) for name in f.names()]


def _expressions(f: Fields, key: str) -> tuple[str, ...] | None:
    """The list of expressions at ``key`` (numbers as YAML read them, written back), or None."""
    items = f.pop(key, list, type(None))
    if items is None:
        return None
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, _EXPR):
            problem = f"is {item!r}, not an expression (a string or a number)"
            raise f.error(f"{key}[{i}]", problem)
    return tuple(str(item) for item in items)


def _three(value: tuple[str, ...] | None, where: str) -> tuple[str, ...]:
    if value is None:
        return ()  # the host code's
    if not 1 <= len(value) <= 3:
        raise LaunchSpecError(f"{where}: a size is a list of 1 to 3 expressions")
    padded = [*value, *["1"] * (3 - len(value))]
    return (padded[0], padded[1], padded[2])


def _leftover(f: Fields, where: str) -> None:
    if left := f.names():
        raise LaunchSpecError(f"{where}: unknown key(s) {', '.join(map(str, left))}")


def spec_path(spec_dir: Path, metal: Path) -> Path:
    return spec_dir / f"{metal.stem}.yaml"


def read_spec(path: Path) -> LaunchSpec:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise LaunchSpecError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise LaunchSpecError(f"{path}: a launch spec is {{kernels: [entries]}}")
    f = Fields(doc, "", str(path))
    try:
        entries = f.objs("kernels") if "kernels" in f.names() else []
        _leftover(f, str(path))
        return LaunchSpec(path, tuple(LaunchCase.from_fields(e, str(path)) for e in entries))
    except DocumentError as exc:  # a hand-written file: said as the spec's error, not a tool's
        raise LaunchSpecError(f"{path}: {exc.where} {exc.problem}") from None
