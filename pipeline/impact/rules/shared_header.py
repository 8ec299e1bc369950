"""Backend-shared native headers (``aten/src/ATen/native/*.h``): the ``DECLARE_DISPATCH``
declarations, and the type aliases they are declared with, of the stubs MPS registers."""

from __future__ import annotations

import re

from pipeline.errors import ParseError
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, sides
from pipeline.tree import dispatch

_STUB_WORD = re.compile(r"\b\w+_stub\b")


def _declared_with(decl: dispatch.StubDecl, alias: str, model: dispatch.DispatchHeader) -> bool:
    """Whether ``decl``'s type is ``alias``, directly or through the file's other aliases."""
    table = {a.name: a for a in reversed(model.aliases)}
    current, seen = decl.fn_type.rsplit("::", 1)[-1], set()
    while current not in seen:
        if current == alias:
            return True
        seen.add(current)
        found = table.get(current)
        if found is None:
            return False
        current = found.target.rsplit("::", 1)[-1]
    return False


def _line_stubs(model: dispatch.DispatchHeader, line: int) -> list[tuple[str, str, bool]]:
    """(stub, what changed, shared) for each stub whose declared type a header line is part
    of; shared: a type alias other stubs may be declared with too, not the stub's own line."""
    found = [
        (d.stub, f"declaration of {d.stub}", False) for d in model.decls if d.span.contains(line)
    ]
    for u in model.unrecognised:  # a declaration whose type the reader could not resolve
        if u.span.contains(line):
            found += [(s, f"declaration of {s}", False) for s in _STUB_WORD.findall(u.text)]
    for alias in model.aliases:
        if alias.span.contains(line):
            found += [
                (d.stub, f"type alias {alias.name} of {d.stub}", True)
                for d in model.decls
                if _declared_with(d, alias.name, model)
            ]
    return found


def rule(change: ChangedFile, ctx: Context) -> None:
    """A backend-shared native header. A changed ``DECLARE_DISPATCH`` of a stub MPS registers,
    or a type alias it is declared with, changes what the MPS kernel function must take: a
    build, and the stub's operator. Other code (helpers, CPU prototypes) is treated like a
    shared .cpp's unattributed code: other backends' business."""
    registered = {
        s.stub for view in (ctx.new, ctx.old) for model in view.host.values() for s in model.stubs
    }
    attributed = False
    for side in sides(change, ctx):
        try:
            model = dispatch.parse(side.text, side.path)
            changed = list(side.changed_code_lines("c"))
        except ParseError as exc:
            ctx.found.full(f"{exc}: its stub declarations are unknown", build=True)
            attributed = True
            continue
        for line in changed:
            for alias in model.aliases:
                if (
                    alias.params is not None
                    and alias.span.contains(line)
                    and not any(_declared_with(d, alias.name, model) for d in model.decls)
                ):
                    ctx.found.warnings.append(
                        f"{side.where(line)}function type {alias.name} changed; stubs other "
                        "headers declare with it are not followed"
                    )
            for stub, what, shared in _line_stubs(model, line):
                if stub not in registered:
                    continue
                ctx.found.hit(
                    ctx.resolver.stub_operator(stub)[0],
                    f"{side.where(line)}{what} changed (MPS registers it)",
                    build=True,
                    construct=("stub type", side.path, stub),
                    shared=shared,
                )
                attributed = True
    if not attributed:
        ctx.found.ignored.append(change.path)
