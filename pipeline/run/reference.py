"""Torch's inputs and references for check-math (``math_torch.py``) and check-kernel
(``kernel_torch.py``), in a subprocess, cached.

The script runs under the configured interpreter (``settings.python``) as a copy in a scratch
directory, as :mod:`pipeline.tree.opinfo` runs ``opinfo_dump.py``. Each (kernel, dtype)'s
answer is cached (``math.cache``, by default the user's cache, which every checkout and
state dir shares; ``cache/kernel``), named by a digest of the case, the script, the
interpreter and its torch (its ``version.py`` and the OpInfo sources): a second check of the
same kernels and dtypes starts no Python at all, and a file's check after one kernel changed
asks torch only for what that kernel registers anew. Answers are written whole (a temporary
file renamed), so runs at once never read half of one; one that does not read is asked again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from pipeline.errors import ConfigError, DocumentError, NoTorchError
from pipeline.fields import Fields, read
from pipeline.fsio import write_atomic
from pipeline.tree import opinfo
from pipeline.tree.source import TreeSource

SCRIPT = Path(__file__).with_name("math_torch.py")
# the modules a script imports from beside it, copied with it and part of its cache key
BESIDE = {SCRIPT.name: (SCRIPT.with_name("math_torch_aten.py"),)}
KERNEL_SCRIPT = Path(__file__).with_name("kernel_torch.py")
MAX_SAMPLES = 256
A = TypeVar("A")  # an answer, as a torch script's reader makes it


class Asked(Protocol):
    """A case a torch script is asked about: its JSON (its id aside, also its cache key), and
    whether it names an OpInfo (whose sources then key it too)."""

    @property
    def id(self) -> str: ...

    @property
    def opinfo(self) -> object: ...

    def to_json(self) -> dict[str, object]: ...


@dataclass(frozen=True)
class Case:
    """One (kernel, input dtype) to make inputs and a reference for."""

    id: str
    dtype: str  # canonical (float32...)
    arity: int
    opinfo: tuple[str, str] | None  # (name, variant_test_name)
    fn: str | None  # torch.<fn> when there is no OpInfo
    alpha: str | None = None  # an ALPHA kernel's scalar operand dtype (canonical)
    aten: tuple[str, ...] = ()  # aten operators to fall back on, first existing one wins
    bound: tuple[tuple[str, str], ...] = ()  # schema arguments fixed (name, literal)
    alpha_arg: str | None = None  # the schema argument the alpha fills, when known
    avoid: tuple[str, ...] = ()  # alpha literals the host never sends this kernel
    operands: tuple[str, ...] = ()  # the schema's tensors in operand order (empty: its order)

    def to_json(self) -> dict[str, object]:
        # the host's scalars only when there are some: a case's cache key is its JSON
        bound = {"bound": [list(b) for b in self.bound]} if self.bound else {}
        alpha_arg = {"alpha_arg": self.alpha_arg} if self.alpha_arg else {}
        avoid = {"avoid": list(self.avoid)} if self.avoid else {}
        operands = {"operands": list(self.operands)} if self.operands else {}
        return {
            "id": self.id,
            "dtype": self.dtype,
            "arity": self.arity,
            "opinfo": list(self.opinfo) if self.opinfo else None,
            "fn": self.fn,
            "alpha": self.alpha,
            "aten": list(self.aten),
            **bound,
            **alpha_arg,
            **avoid,
            **operands,
        }


@dataclass(frozen=True)
class _CaseOut:
    """One case of math_torch.py's OUT as it is written (its docstring has the shape); a
    case the script refused early leaves the keys with a default out."""

    n: int
    inputs: tuple[str, ...]  # base64 of each operand's bytes, one block
    errors: dict[str, str]
    block: int | None = None
    alphas: tuple[str, ...] | None = None  # base64 of each alpha value
    alpha_shown: tuple[str, ...] | None = None
    edge: int | None = None
    samples: int | None = None
    reference: str | None = None  # base64 of n values
    result_dtype: str | None = None
    upcast: bool | None = None
    via: str | None = None
    no_reference: str | None = None
    kwargs: dict[str, object] | None = None  # for readers: the keywords the reference ran with
    note: str | None = None  # for readers: why op_db could not be imported


@dataclass(frozen=True)
class TorchAnswer:
    """math_torch.py's answer for one case, read once: the inputs, alphas and reference
    decoded from base64. A case the script failed on answers ``no_reference`` and no
    inputs."""

    n: int  # values per operand, every alpha's block together
    block: int  # values per operand for one alpha value (``n`` without alphas)
    inputs: tuple[bytes, ...]  # one block per operand
    alphas: tuple[bytes, ...]  # each alpha value
    alpha_shown: tuple[str, ...]  # each alpha value, as torch prints it
    edge: int  # of the block: edge values (the rest are the OpInfo's samples)
    samples: int
    reference: bytes | None  # n values, or None without a reference
    result_dtype: str | None
    errors: Mapping[int, str]  # value index -> what torch refused there
    upcast: bool
    via: str | None  # the aten overload a fallback used
    no_reference: str | None

    @classmethod
    def from_json(cls, answer: object, case_id: str) -> TorchAnswer:
        out = read(_CaseOut, answer, SCRIPT.name, case_id)
        return cls(
            n=out.n,
            block=out.block or out.n,
            inputs=tuple(base64.b64decode(x) for x in out.inputs),
            alphas=tuple(base64.b64decode(a) for a in out.alphas or ()),
            alpha_shown=out.alpha_shown or (),
            edge=out.edge or 0,
            samples=out.samples or 0,
            reference=None if out.reference is None else base64.b64decode(out.reference),
            result_dtype=out.result_dtype,
            errors={int(i): message for i, message in out.errors.items()},
            upcast=bool(out.upcast),
            via=out.via,
            no_reference=out.no_reference,
        )


@dataclass(frozen=True)
class _Storage:
    """A tensor input of kernel_torch.py's answer: its storage from the view's offset."""

    data: str  # base64
    shape: tuple[object, ...]  # for readers: the view's shape and strides
    stride: tuple[object, ...]


@dataclass(frozen=True)
class _RunOut:
    """kernel_torch.py's answer for one input of a kernel case, as it is written (its
    docstring has the shape)."""

    label: str
    tensors: dict[str, _Storage]
    structs: dict[str, dict[str, int | tuple[int, ...]]]
    grid: tuple[int, int, int]
    tptg: tuple[int, int, int]
    output_bytes: int
    output_dtype: str
    reference: str | None  # base64
    error: str | None


@dataclass(frozen=True)
class KernelAnswer:
    """kernel_torch.py's answer for one input of a kernel case, read once: the inputs'
    bytes decoded, the structs' values, the launch sizes evaluated."""

    label: str  # the input: "large magnitudes, length 1025"
    tensors: Mapping[str, bytes]  # input name -> its storage from the view's offset
    structs: Mapping[str, Mapping[str, int | list[int]]]  # struct -> field -> value(s)
    grid: tuple[int, ...]  # 3
    tptg: tuple[int, ...]  # 3: threads per threadgroup
    output_bytes: int
    output_dtype: str
    reference: bytes | None
    error: str | None  # torch's message when it refused the input

    @classmethod
    def from_json(cls, run: object, where: str) -> KernelAnswer:
        out = read(_RunOut, run, KERNEL_SCRIPT.name, where)
        return cls(
            label=out.label,
            tensors={name: base64.b64decode(t.data) for name, t in out.tensors.items()},
            structs={
                name: {f: list(v) if isinstance(v, tuple) else v for f, v in values.items()}
                for name, values in out.structs.items()
            },
            grid=out.grid,
            tptg=out.tptg,
            output_bytes=out.output_bytes,
            output_dtype=out.output_dtype,
            reference=None if out.reference is None else base64.b64decode(out.reference),
            error=out.error,
        )


def torch_package(source: TreeSource) -> Path:
    """The interpreter's torch package folder (found once, cached like the OpInfo dump's)."""
    try:
        internal = opinfo._source_dir(source)  # noqa: SLF001 - one lookup of torch, shared
    except ConfigError as exc:
        raise NoTorchError(
            f"python={source.python} cannot import torch, which check-math needs for the "
            "reference: point python= (--python, MPS_PIPELINE_PYTHON) at an interpreter that "
            "has it, such as the one your checkout is built into"
        ) from exc
    if internal == source.root / opinfo.INTERNAL:
        # a checkout's own torch/testing/_internal: its torch is the checkout's torch/
        return source.root / "torch"
    return internal.parents[1]


def references(
    source: TreeSource, cases: list[Case], cache_dir: Path, *, max_samples: int = MAX_SAMPLES
) -> dict[str, TorchAnswer]:
    """math_torch.py's answer for each of ``cases``, by case id, kept per case (see
    :func:`cached`)."""
    request = {"max_samples": max_samples}
    return cached(source, SCRIPT, cases, cache_dir, request, TorchAnswer.from_json)


def kernel_references(
    source: TreeSource, cases: Sequence[Asked], cache_dir: Path
) -> dict[str, tuple[KernelAnswer, ...]]:
    """kernel_torch.py's answers for each of ``cases`` (one per input it made), by case id,
    kept per case (see :func:`cached`)."""
    return cached(source, KERNEL_SCRIPT, cases, cache_dir, {}, _kernel_answers)


def _kernel_answers(answer: object, case_id: str) -> tuple[KernelAnswer, ...]:
    if not isinstance(answer, list):
        raise DocumentError(KERNEL_SCRIPT.name, case_id, "must be list")
    return tuple(KernelAnswer.from_json(run, f"{case_id}[{i}]") for i, run in enumerate(answer))


@dataclass(frozen=True)
class _ScriptOut:
    """A torch script's OUT: each case's answer, by id."""

    torch: str  # for readers: the torch that answered
    cases: dict[str, object]


def cached(
    source: TreeSource,
    script: Path,
    cases: Sequence[Asked],
    cache_dir: Path,
    request: Mapping[str, object],
    parse: Callable[[object, str], A],
) -> dict[str, A]:
    """``script``'s answer for each case, by id, in the order asked, read with ``parse``
    (answer, case id). Each is kept in ``cache_dir`` under a digest of the case (its id
    aside), the script, the rest of the ``request`` and the interpreter's torch (and the
    OpInfo sources when the case names an OpInfo); the script runs for the cases not kept
    yet, and not at all when every one is. A kept answer that does not read (damaged, or
    not the shape ``parse`` reads) is never used: the script is asked again."""
    package = torch_package(source)
    common = hashlib.sha256(script.read_bytes())
    for module in BESIDE.get(script.name, ()):
        common.update(module.read_bytes())
    common.update(f"{source.python}\0{json.dumps(request, sort_keys=True)}\0".encode())
    version = package / "version.py"
    if version.is_file():
        common.update(version.read_bytes())
    sources = None
    answers: dict[str, A] = {}
    missing: dict[str, tuple[dict[str, object], Path]] = {}
    for case in cases:
        asked = case.to_json()
        digest = common.copy()
        digest.update(json.dumps({**asked, "id": None}, sort_keys=True).encode())
        if case.opinfo:  # the OpInfo's samples come from its sources
            sources = sources or opinfo._source_hash(opinfo._source_dir(source))  # noqa: SLF001
            digest.update(sources.encode())
        path = cache_dir / f"reference-{digest.hexdigest()[:24]}.json"
        try:
            answers[case.id] = parse(json.loads(path.read_text(encoding="utf-8")), case.id)
        except (OSError, ValueError, DocumentError):  # none yet, or a damaged one: asked again
            missing[case.id] = (asked, path)
    if missing:
        asking = {**request, "cases": [c for c, _ in missing.values()]}
        out = read(_ScriptOut, run_script(source, script, asking), script.name)
        found = Fields(out.cases, "cases", script.name)  # keyed by case id
        cache_dir.mkdir(parents=True, exist_ok=True)
        for case_id, (_, path) in missing.items():
            answer = found.pop(case_id, dict, list)
            answers[case_id] = parse(answer, case_id)  # one that does not read is never kept
            write_atomic(path, json.dumps(answer))
        found.done()
    return {case.id: answers[case.id] for case in cases}


def run_script(source: TreeSource, script: Path, request: Mapping[str, object]) -> object:
    """``script REQUEST OUT`` under the configured interpreter, as a copy in a scratch
    directory (it imports only the standard library and torch): its JSON answer."""
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-torch-") as tmp:
        copy = Path(tmp) / script.name
        for module in (script, *BESIDE.get(script.name, ())):
            shutil.copyfile(module, Path(tmp) / module.name)
        req, out = Path(tmp) / "request.json", Path(tmp) / "out.json"
        req.write_text(json.dumps(request), encoding="utf-8")
        opinfo._run(source.python, [str(copy), str(req), str(out)], "compute torch references")  # noqa: SLF001
        return json.loads(out.read_text(encoding="utf-8"))
