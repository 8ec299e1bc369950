"""check-kernel's build results and their records: what a build found of each kernel
(:class:`KernelBuild`) and of the file (:class:`FileBuild`), and the record a build leaves
beside its object (:class:`Manifest`), from which the same inputs are answered without the
compiler (:mod:`pipeline.run.cxx`'s manifests: reused while every file listed is the same).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.run import cxx
from pipeline.run.build import CompilerError
from pipeline.run.kernel_decls import KernelDecl, Param


@dataclass(frozen=True)
class KernelBuild:
    """One kernel of the file: it compiles when ``error`` and ``not_modelled`` are empty."""

    decl: KernelDecl
    # in the object's table; -1 when not in the object (it failed, or was only checked)
    index: int = -1
    error: CompilerError | None = None
    not_modelled: tuple[str, ...] = ()

    @property
    def built(self) -> bool:
        return self.error is None and not self.not_modelled

    @property
    def in_object(self) -> bool:
        return self.index >= 0 and self.built


@dataclass(frozen=True)
class FileBuild:
    metal: Path
    library: Path | None  # None when no kernel was asked to run, or the file failed
    kernels: tuple[KernelBuild, ...]
    cached: bool
    seconds: float
    set_aside: tuple[str, ...] = ()
    log: str = ""
    error: CompilerError | None = None  # the file itself: nothing of it could be read
    # a launch spec's struct type -> why its layout could not be read (a field it lacks)
    probe_errors: dict[str, str] = field(default_factory=dict)
    # the compiler's label when the builder's bfloat compiler built it, not its own
    built_with: str | None = None
    # the kernels the bfloat compiler built alone, when the class compiled the rest
    retried: tuple[str, ...] = ()
    # the kernels the check's first round failed: what the bfloat compiler's build beside
    # the rest of it was given (its record's name, for a build read from the cache)
    first_round: tuple[str, ...] = ()

    @property
    def built_count(self) -> int:
        return sum(k.built for k in self.kernels)


def record(
    metal: Path,
    base: Path,
    kernels: Sequence[KernelBuild],
    set_aside: tuple[str, ...],
    library: Path | None,
    probe_errors: dict[str, str],
    first_round: tuple[str, ...],
) -> None:
    """Write the build's record: every file its passes read, by digest, and each kernel."""
    depfiles = [base.with_suffix(suffix) for suffix in (".parse.d", ".d")]
    depfiles.append(base.with_name(f"{base.name}-check.d"))
    deps = [p for f in depfiles if f.is_file() for p in cxx.read_depfile(f)] + [metal]
    digests = {str(p): cxx.file_digest(p) for p in deps if "kernel.metal" not in p.name}
    saved = Manifest(
        digests, set_aside, library is not None, _KernelTable.of(kernels), probe_errors,
        first_round,
    )  # fmt: skip
    cxx.write_manifest(base.with_suffix(".json"), saved)


def cached(metal: Path, base: Path, start: float) -> FileBuild | None:
    """The build ``base`` names, when its manifest still matches (and its object is there,
    if it has one)."""
    library = base.with_suffix(".so")
    saved = cxx.read_manifest(base.with_suffix(".json"), Manifest)
    if saved is None or (saved.library and not library.is_file()):
        return None
    return FileBuild(
        metal, library if saved.library else None, saved.kernels.builds(), True,
        time.monotonic() - start, saved.set_aside, probe_errors=saved.probe_errors,
        first_round=saved.first_round,
    )  # fmt: skip


# a Param, a CompilerError and a KernelBuild as rows of the manifest's table
_ParamRow = tuple[str, str, str, int, str, str]
_ErrorRow = tuple[str, int, int | None, str]
_KernelRow = tuple[str, str, str | None, int, int, str, int, _ErrorRow | None, tuple[str, ...]]


@dataclass(frozen=True)
class _KernelTable:
    """The kernels as rows, each parameter and each parameter list once (a file of
    thousands of kernels has a few hundred): what keeps a cached build quick to read."""

    params: tuple[_ParamRow, ...]
    signatures: tuple[tuple[int, ...], ...]  # each a parameter list, by its params' rows
    rows: tuple[_KernelRow, ...]

    @classmethod
    def of(cls, kernels: Sequence[KernelBuild]) -> _KernelTable:
        params: dict[Param, int] = {}
        signatures: dict[tuple[Param, ...], int] = {}
        rows: list[_KernelRow] = []
        for k in kernels:
            d, e = k.decl, k.error
            if d.params not in signatures:
                signatures[d.params] = len(signatures)
                for p in d.params:
                    params.setdefault(p, len(params))
            error = (e.path, e.line, e.column, e.message) if e else None
            rows.append((d.host_name, d.function, d.template_args, signatures[d.params], d.line,
                         d.max_threads, k.index, error, k.not_modelled))  # fmt: skip
        return cls(
            tuple((p.type, p.name, p.kind, p.index, p.attr, p.why) for p in params),
            tuple(tuple(params[p] for p in sig) for sig in signatures),
            tuple(rows),
        )

    def builds(self) -> tuple[KernelBuild, ...]:
        params = [Param(*p) for p in self.params]
        signatures = [tuple(params[i] for i in sig) for sig in self.signatures]
        return tuple(
            KernelBuild(
                KernelDecl(name, function, targs, signatures[sig], line, max_threads),
                index,
                CompilerError(*error) if error else None,
                not_modelled,
            )
            for name, function, targs, sig, line, max_threads, index, error, not_modelled in (
                self.rows
            )
        )


@dataclass(frozen=True)
class Manifest(cxx.Manifest):
    """A file's build record: what it was built from, whether it has an object (a build
    whose kernels were only checked has none), and each kernel as built."""

    library: bool = False
    kernels: _KernelTable = _KernelTable((), (), ())
    # a launch spec's struct type -> why its layout could not be read (a field it lacks)
    probe_errors: dict[str, str] = field(default_factory=dict)
    first_round: tuple[str, ...] = ()  # FileBuild's
