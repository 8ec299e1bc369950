"""Torch's inputs and references for check-math (``math_torch.py``) and check-kernel
(``kernel_torch.py``), in a subprocess, cached.

The script runs under the configured interpreter (``settings.python``) as a copy in a scratch
directory, as :mod:`pipeline.tree.opinfo` runs ``opinfo_dump.py``. Each (kernel, dtype)'s
answer is cached (``math.cache``, ``cache/kernel``), named by a digest of the case, the
script and the interpreter's torch (its ``version.py`` and the OpInfo sources): a second
check of the same kernels and dtypes starts no Python at all, and a file's check after one
kernel changed asks torch only for what that kernel registers anew.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pipeline.errors import ConfigError, DocumentError, NoTorchError
from pipeline.fields import Fields
from pipeline.fsio import write_atomic
from pipeline.tree import opinfo
from pipeline.tree.source import TreeSource

SCRIPT = Path(__file__).with_name("math_torch.py")
KERNEL_SCRIPT = Path(__file__).with_name("kernel_torch.py")
MAX_SAMPLES = 256


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

    def to_json(self) -> dict[str, object]:
        # the host's scalars only when there are some: a case's cache key is its JSON
        bound = {"bound": [list(b) for b in self.bound]} if self.bound else {}
        alpha_arg = {"alpha_arg": self.alpha_arg} if self.alpha_arg else {}
        avoid = {"avoid": list(self.avoid)} if self.avoid else {}
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
        }


@dataclass(frozen=True)
class TorchAnswer:
    """math_torch.py's answer for one case (its docstring has the shape), read once: the
    inputs, alphas and reference decoded from base64. A case the script failed on answers
    ``no_reference`` and no inputs."""

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
    def from_fields(cls, f: Fields) -> TorchAnswer:
        n = f.pop("n", int)
        ref = f.pop("reference", str, type(None))
        errors = f.obj("errors")
        found = cls(
            n=n,
            block=f.pop("block", int, type(None)) or n,
            inputs=tuple(base64.b64decode(x) for x in f.strings("inputs")),
            alphas=tuple(base64.b64decode(a) for a in f.strings_or_none("alphas") or ()),
            alpha_shown=f.strings_or_none("alpha_shown") or (),
            edge=f.pop("edge", int, type(None)) or 0,
            samples=f.pop("samples", int, type(None)) or 0,
            reference=None if ref is None else base64.b64decode(ref),
            result_dtype=f.pop("result_dtype", str, type(None)),
            errors={int(i): errors.pop(i, str) for i in errors.names()},
            upcast=bool(f.pop("upcast", bool, type(None))),
            via=f.pop("via", str, type(None)),
            no_reference=f.pop("no_reference", str, type(None)),
        )
        f.pop("kwargs", dict, type(None))  # for readers: the keywords the reference ran with
        f.pop("note", str, type(None))
        for done in (errors, f):
            done.done()
        return found


@dataclass(frozen=True)
class KernelAnswer:
    """kernel_torch.py's answer for one input of a kernel case (its docstring has the shape),
    read once: the inputs' bytes decoded, the structs' values, the launch sizes evaluated."""

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
    def from_fields(cls, f: Fields) -> KernelAnswer:
        tensors, structs = f.obj("tensors"), f.obj("structs")
        ref = f.pop("reference", str, type(None))
        found = cls(
            label=f.pop("label", str),
            tensors={name: _storage(tensors.obj(name)) for name in tensors.names()},
            structs={name: _values(structs.obj(name)) for name in structs.names()},
            grid=_ints(f, "grid"),
            tptg=_ints(f, "tptg"),
            output_bytes=f.pop("output_bytes", int),
            output_dtype=f.pop("output_dtype", str),
            reference=None if ref is None else base64.b64decode(ref),
            error=f.pop("error", str, type(None)),
        )
        for done in (tensors, structs, f):
            done.done()
        return found


def _storage(f: Fields) -> bytes:
    data = base64.b64decode(f.pop("data", str))
    f.pop("shape", list)  # for readers: the view's shape and strides
    f.pop("stride", list)
    f.done()
    return data


def _values(f: Fields) -> dict[str, int | list[int]]:
    found = {field: f.pop(field, int, list) for field in f.names()}
    f.done()
    return found


def _ints(f: Fields, key: str) -> tuple[int, ...]:
    found = f.pop(key, list)
    if len(found) != 3 or not all(isinstance(n, int) and not isinstance(n, bool) for n in found):
        raise f.error(key, f"is {found!r}, not three integers")
    return tuple(found)


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
    found = cached(source, SCRIPT, cases, cache_dir, request)
    return {
        case_id: TorchAnswer.from_fields(Fields(answer, case_id, SCRIPT.name))
        for case_id, answer in found.items()
    }


def kernel_references(
    source: TreeSource, cases: Sequence[Asked], cache_dir: Path
) -> dict[str, tuple[KernelAnswer, ...]]:
    """kernel_torch.py's answers for each of ``cases`` (one per input it made), by case id,
    kept per case (see :func:`cached`)."""
    found = {}
    for case_id, answer in cached(source, KERNEL_SCRIPT, cases, cache_dir, {}).items():
        if not isinstance(answer, list):
            raise DocumentError(KERNEL_SCRIPT.name, case_id, "must be list")
        found[case_id] = tuple(
            KernelAnswer.from_fields(Fields(run, f"{case_id}[{i}]", KERNEL_SCRIPT.name))
            for i, run in enumerate(answer)
        )
    return found


def cached(
    source: TreeSource,
    script: Path,
    cases: Sequence[Asked],
    cache_dir: Path,
    request: Mapping[str, object],
) -> dict[str, object]:
    """``script``'s answer for each case, by id, in the order asked. Each is kept in
    ``cache_dir`` under a digest of the case (its id aside), the script, the rest of the
    ``request`` and the interpreter's torch (and the OpInfo sources when the case names an
    OpInfo); the script runs for the cases not kept yet, and not at all when every one is."""
    package = torch_package(source)
    common = hashlib.sha256(script.read_bytes())
    common.update(f"{source.python}\0{json.dumps(request, sort_keys=True)}\0".encode())
    version = package / "version.py"
    if version.is_file():
        common.update(version.read_bytes())
    sources = None
    answers: dict[str, object] = {}
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
            answers[case.id] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none yet, or a damaged one: computed again
            missing[case.id] = (asked, path)
    if missing:
        asking = {**request, "cases": [c for c, _ in missing.values()]}
        f = Fields(run_script(source, script, asking), "", script.name)
        f.pop("torch", str)  # for readers: the torch that answered
        found = f.obj("cases")
        cache_dir.mkdir(parents=True, exist_ok=True)
        for case_id, (_, path) in missing.items():
            answer = found.pop(case_id, dict, list)
            write_atomic(path, json.dumps(answer))
            answers[case_id] = answer
        for done in (found, f):
            done.done()
    return {case.id: answers[case.id] for case in cases}


def run_script(source: TreeSource, script: Path, request: Mapping[str, object]) -> object:
    """``script REQUEST OUT`` under the configured interpreter, as a copy in a scratch
    directory (it imports only the standard library and torch): its JSON answer."""
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-torch-") as tmp:
        copy = Path(tmp) / script.name
        shutil.copyfile(script, copy)
        req, out = Path(tmp) / "request.json", Path(tmp) / "out.json"
        req.write_text(json.dumps(request), encoding="utf-8")
        opinfo._run(source.python, [str(copy), str(req), str(out)], "compute torch references")  # noqa: SLF001
        return json.loads(out.read_text(encoding="utf-8"))
