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
from typing import Any

from pipeline.errors import ConfigError, NoTorchError
from pipeline.fields import Fields
from pipeline.fsio import write_atomic
from pipeline.tree import opinfo
from pipeline.tree.source import TreeSource

SCRIPT = Path(__file__).with_name("math_torch.py")
MAX_SAMPLES = 256
_NULL = type(None)


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

    def to_json(self) -> dict[str, Any]:
        # the host's scalars only when there are some: a case's cache key is its JSON
        host: dict[str, Any] = {"bound": [list(b) for b in self.bound]} if self.bound else {}
        if self.alpha_arg:
            host["alpha_arg"] = self.alpha_arg
        if self.avoid:
            host["avoid"] = list(self.avoid)
        return {
            "id": self.id,
            "dtype": self.dtype,
            "arity": self.arity,
            "opinfo": list(self.opinfo) if self.opinfo else None,
            "fn": self.fn,
            "alpha": self.alpha,
            "aten": list(self.aten),
            **host,
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
        ref = f.pop("reference", str, _NULL)
        errors = f.obj("errors")
        found = cls(
            n=n,
            block=f.pop("block", int, _NULL) or n,
            inputs=tuple(base64.b64decode(x) for x in f.strings("inputs")),
            alphas=tuple(base64.b64decode(a) for a in f.strings_or_none("alphas") or ()),
            alpha_shown=f.strings_or_none("alpha_shown") or (),
            edge=f.pop("edge", int, _NULL) or 0,
            samples=f.pop("samples", int, _NULL) or 0,
            reference=None if ref is None else base64.b64decode(ref),
            result_dtype=f.pop("result_dtype", str, _NULL),
            errors={int(i): errors.pop(i, str) for i in errors.names()},
            upcast=bool(f.pop("upcast", bool, _NULL)),
            via=f.pop("via", str, _NULL),
            no_reference=f.pop("no_reference", str, _NULL),
        )
        f.pop("kwargs", dict, _NULL)  # for readers: the keywords the reference ran with
        f.pop("note", str, _NULL)
        for done in (errors, f):
            done.done()
        return found


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
    found = cached(source, SCRIPT, [c.to_json() for c in cases], cache_dir, request)
    return {
        case_id: TorchAnswer.from_fields(Fields(answer, case_id, SCRIPT.name))
        for case_id, answer in found.items()
    }


def cached(
    source: TreeSource,
    script: Path,
    cases: Sequence[Mapping[str, Any]],
    cache_dir: Path,
    request: Mapping[str, Any],
) -> dict[str, Any]:
    """``script``'s answer for each case (``{"id", "opinfo", ...}``), by id, in the order
    asked. Each is kept in ``cache_dir`` under a digest of the case (its id aside), the
    script, the rest of the ``request`` and the interpreter's torch (and the OpInfo sources
    when the case names an OpInfo); the script runs for the cases not kept yet, and not at
    all when every one is."""
    package = torch_package(source)
    common = hashlib.sha256(script.read_bytes())
    common.update(f"{source.python}\0{json.dumps(request, sort_keys=True)}\0".encode())
    version = package / "version.py"
    if version.is_file():
        common.update(version.read_bytes())
    sources = None
    answers: dict[str, Any] = {}
    missing: dict[str, tuple[Mapping[str, Any], Path]] = {}
    for case in cases:
        digest = common.copy()
        digest.update(json.dumps({**case, "id": None}, sort_keys=True).encode())
        if case.get("opinfo"):  # the OpInfo's samples come from its sources
            sources = sources or opinfo._source_hash(opinfo._source_dir(source))  # noqa: SLF001
            digest.update(sources.encode())
        path = cache_dir / f"reference-{digest.hexdigest()[:24]}.json"
        try:
            answers[case["id"]] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none yet, or a damaged one: computed again
            missing[case["id"]] = (case, path)
    if missing:
        asked = {**request, "cases": [c for c, _ in missing.values()]}
        found = run_script(source, script, asked)["cases"]
        cache_dir.mkdir(parents=True, exist_ok=True)
        for case_id, (_, path) in missing.items():
            write_atomic(path, json.dumps(found[case_id]))
            answers[case_id] = found[case_id]
    return {c["id"]: answers[c["id"]] for c in cases}


def run_script(source: TreeSource, script: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``script REQUEST OUT`` under the configured interpreter, as a copy in a scratch
    directory (it imports only the standard library and torch): its JSON answer."""
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-torch-") as tmp:
        copy = Path(tmp) / script.name
        shutil.copyfile(script, copy)
        req, out = Path(tmp) / "request.json", Path(tmp) / "out.json"
        req.write_text(json.dumps(request), encoding="utf-8")
        opinfo._run(source.python, [str(copy), str(req), str(out)], "compute torch references")  # noqa: SLF001
        answer: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return answer
