"""check-math's inputs and torch references: ``math_torch.py`` in a subprocess, cached.

The script runs under the configured interpreter (``settings.python``) as a copy in a scratch
directory, as :mod:`pipeline.tree.opinfo` runs ``opinfo_dump.py``. Its answer is cached under
``<cache>/math/``, named by a digest of the request, the script and the interpreter's torch
(its ``version.py`` and the OpInfo sources), so a second check of the same functor and
dtypes starts no Python at all.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.fsio import write_atomic
from pipeline.tree import opinfo
from pipeline.tree.source import TreeSource

SCRIPT = Path(__file__).with_name("math_torch.py")
MAX_SAMPLES = 256


@dataclass(frozen=True)
class Case:
    """One (kernel, input dtype) to make inputs and a reference for."""

    id: str
    dtype: str  # canonical (float32...)
    arity: int
    opinfo: tuple[str, str] | None  # (name, variant_test_name)
    fn: str | None  # torch.<fn> when there is no OpInfo

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dtype": self.dtype,
            "arity": self.arity,
            "opinfo": list(self.opinfo) if self.opinfo else None,
            "fn": self.fn,
        }


class NoTorchError(ConfigError):
    """The configured interpreter has no torch: no reference, no wheel headers (exit 2)."""


def torch_package(source: TreeSource) -> Path:
    """The interpreter's torch package folder (found once, cached like the OpInfo dump's)."""
    try:
        internal = opinfo._source_dir(source)  # noqa: SLF001 - one lookup of torch, shared
    except ConfigError as exc:
        raise NoTorchError(
            f"python={source.python} cannot import torch, which check-math needs for the "
            "reference (point python= at the interpreter your checkout is built into)"
        ) from exc
    if internal == source.root / opinfo.INTERNAL:
        # a checkout's own torch/testing/_internal: its torch is the checkout's torch/
        return source.root / "torch"
    return internal.parents[1]


def references(
    source: TreeSource, cases: list[Case], cache_dir: Path, *, max_samples: int = MAX_SAMPLES
) -> dict[str, Any]:
    """The script's answer for ``cases`` (see math_torch.py for its shape), kept in
    ``cache_dir`` under a digest of the request, the script and the interpreter's torch."""
    request = {"max_samples": max_samples, "cases": [c.to_json() for c in cases]}
    text = json.dumps(request, sort_keys=True)
    package = torch_package(source)
    digest = hashlib.sha256(SCRIPT.read_bytes() + text.encode())
    digest.update(source.python.encode())
    version = package / "version.py"
    if version.is_file():
        digest.update(version.read_bytes())
    if any(c.opinfo for c in cases):
        digest.update(opinfo._source_hash(opinfo._source_dir(source)).encode())  # noqa: SLF001
    cache = cache_dir / f"reference-{digest.hexdigest()[:24]}.json"
    if cache.is_file():
        try:
            data: dict[str, Any] = json.loads(cache.read_text(encoding="utf-8"))
            return data
        except ValueError:
            pass  # a damaged cache file: compute it again
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-math-") as tmp:
        script = Path(tmp) / SCRIPT.name
        shutil.copyfile(SCRIPT, script)
        req, out = Path(tmp) / "request.json", Path(tmp) / "out.json"
        req.write_text(text, encoding="utf-8")
        opinfo._run(source.python, [str(script), str(req), str(out)], "compute torch references")  # noqa: SLF001
        data = json.loads(out.read_text(encoding="utf-8"))
    cache.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(cache, json.dumps(data))
    return data
