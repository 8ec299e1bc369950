"""What Inductor's generated Metal code uses of ``c10/metal``, read from its code generator.

``torch/_inductor/codegen/mps.py`` writes kernels as text: a call is a string such as
``f"c10::metal::floor_divide({a}, {b})"``, a family of calls a prefix with the rest filled
in (``f"c10::metal::threadgroup_{reduction_type}(...)"``), and the special functions a
name from a list put after ``c10::metal::{name}``. The headers it includes are the names
given to ``headers.add("...")``. A change to a c10/metal helper is matched against these
facts; a name built some other way is not seen, so a miss is said as "not found by name",
never as "not called".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.tree import paths

_CALL = re.compile(r"c10::metal::(\w*)(\{?)")
_HEADER = re.compile(r"""headers\.add\(\s*["'](\w+)["']\s*\)""")
_LITERAL = re.compile(r"""["'](\w+)["']""")


@dataclass(frozen=True)
class InductorMetal:
    """The c10::metal names and headers one version of the code generator uses."""

    path: str
    called: frozenset[str]  # written out whole after c10::metal::
    prefixes: frozenset[str]  # c10::metal::PREFIX{...}: every name starting with PREFIX
    # quoted words of the file, the candidates for c10::metal::{name} (empty if none is
    # written that way)
    literals: frozenset[str]
    headers: frozenset[str]  # c10/metal/<name>.h paths its kernels include

    def calls(self, name: str) -> str | None:
        """How the generated code calls ``c10::metal::name``, or None if not found by name."""
        if name in self.called:
            return f"c10::metal::{name}"
        prefix = next((p for p in sorted(self.prefixes) if name.startswith(p)), None)
        if prefix is not None:
            return f"c10::metal::{prefix}{{...}}"
        if name in self.literals or any(
            name[:i] in self.literals and name[i:] in self.literals for i in range(1, len(name))
        ):
            return f'c10::metal::{{name}} with "{name}"'
        return None


def parse(text: str, path: str = paths.INDUCTOR_MPS_CODEGEN) -> InductorMetal:
    called: set[str] = set()
    prefixes: set[str] = set()
    dynamic = False
    for match in _CALL.finditer(text):
        name, brace = match.groups()
        if brace and not name:
            dynamic = True
        elif brace:
            prefixes.add(name)
        elif name:
            called.add(name)
    headers = {f"{paths.C10_METAL_DIR}/{h}.h" for h in _HEADER.findall(text)}
    literals = set(_LITERAL.findall(text)) if dynamic else set()
    return InductorMetal(
        path, frozenset(called), frozenset(prefixes), frozenset(literals), frozenset(headers)
    )
