"""The impact rules, one module per kind of file, and the registry that maps each kind
:func:`~pipeline.impact.analyze.classify` returns to its rule.

Every rule is a function of one changed file and the shared :class:`Context`: it names
operators (``ctx.found.hit``), asks for the full sweep saying why (``ctx.found.full``), or
lists the file as ignored. Rules import :mod:`pipeline.impact.model`, never ``analyze``.

- ``native_yaml``: ``native_functions.yaml`` (kind ``yaml``)
- ``metal``: ``.metal`` kernel sources
- ``c10_metal``: headers under ``c10/metal/``: the functors calling a changed helper, and
  the Inductor MPS tests
- ``header``: headers under ``kernels/``
- ``host``: ``.mm`` host files under ``native/mps/operations/``
- ``common_mps``: the xfail lists
- ``opinfo``: OpInfo definitions
- ``shared_cpp``, ``shared_header``: backend-shared ``native/*.cpp`` and ``native/*.h``
- ``simple``: ``mps_other``, ``test_mps``, ``testing``, ``inductor_codegen`` and
  ``ignored``, which read nothing
"""

from __future__ import annotations

from typing import Protocol

from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context
from pipeline.impact.rules import (
    c10_metal,
    common_mps,
    header,
    host,
    metal,
    native_yaml,
    opinfo,
    shared_cpp,
    shared_header,
    simple,
)


class Rule(Protocol):
    """What one kind of changed file affects, added to ``ctx.found``."""

    def __call__(self, change: ChangedFile, ctx: Context, /) -> None: ...


RULES: dict[str, Rule] = {
    "yaml": native_yaml.rule,
    "metal": metal.rule,
    "c10_metal": c10_metal.rule,
    "header": header.rule,
    "inductor_codegen": simple.inductor_codegen,
    "host": host.rule,
    "mps_other": simple.mps_other,
    "shared_cpp": shared_cpp.rule,
    "shared_header": shared_header.rule,
    "common_mps": common_mps.rule,
    "opinfo": opinfo.rule,
    "test_mps": simple.test_mps,
    "testing": simple.testing,
    "ignored": simple.ignored,
}

__all__ = ["RULES", "Rule"]
