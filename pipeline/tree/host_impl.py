"""A kernel an MPS implementation launches by name, and its operator (issue 27).

Besides stubs' kernel functions (:mod:`pipeline.tree.host_choice`), upstream's host code
runs kernels from the functions the yaml's MPS rows name: ``TORCH_IMPL_FUNC(mse_loss_out_mps)``
calls ``binary_op_kernel("mse", input, target, output_)`` under ``reduction ==
Reduction::None``; ``huber_loss_out_mps`` calls a shared ``smooth_huber_native(...,
/*is_huber=*/true, output, std::nullopt, ...)``, which picks ``op = is_huber ? "huber" :
"smooth_l1"`` and, past the conditions it returns under, runs ``binary_op_kernel(op, input,
target, out, c10::Scalar(beta))``; ``binary_op_kernel`` builds an iterator over its
arguments and runs ``lib.exec_binary_kernel(iter, func_name, alpha)``.

Followed here from every such function whose schema has one out argument: each call of a
function the host files define, with its arguments put in for its parameters (a local
assigned under conditions becomes those conditions' ``?:``), down to ``exec_KIND_kernel``.
A launch there is the operator's (its functional overload's) only when:

- the iterator's output is the out argument and its inputs the schema's tensors, in order
  (a launch into a temporary the host multiplies afterwards, or of operands it scales
  first, is not: its reference is unknown, and says so);
- the conditions it runs under fix the operator's scalars or leave them free
  (:mod:`pipeline.tree.host_cond`; an enum constant such as ``Reduction::None`` is read from
  the tree's headers);
- the scalar it passes is one of the operator's arguments (the functor's alpha).

Host parameters line up with the schema's arguments by position (out arguments last, as
upstream writes them); a host function that does not line up is unknown, not guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline.errors import ParseError
from pipeline.tree import host_cond, paths
from pipeline.tree.cpp import CppText, lex, match_close, param_type, scan, split_args
from pipeline.tree.host_choice import param_names
from pipeline.tree.host_cond import SCALAR, TENSOR, Cond, conj, neg, parse, reach
from pipeline.tree.native_yaml import NativeFunction

_IMPL_FUNC = re.compile(r"\bTORCH_IMPL_FUNC\s*\(\s*([A-Za-z_]\w*)\s*\)\s*\(")
_NAME = re.compile(r"((?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*)\s*\Z")
_NOT_FUNCTION = re.compile(r"\b(?:struct|class|union|enum|typedef|using|namespace)\b|=")
_CALL = re.compile(r"(?<![\w:])((?:[A-Za-z_]\w*::)*)([A-Za-z_]\w*)\s*\(")
_EXEC = re.compile(r"exec_(\w+?)_kernel\Z")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z_]\w*|\S')
_ITER_ARG = re.compile(r"\.\s*add_(output|input)\s*\(")
# what passes a tensor on as it is: casts (a call such as at::abs(input) computes another)
_TENSOR_CAST = re.compile(
    r"(?:const_cast|static_cast)\s*<[^<>]*>\s*\((.*)\)\Z|\((?:const\s+)?[\w:]*Tensor\s*&?\)\s*(.*)\Z",
    re.S,
)
# what passes a scalar on as it is: c10::Scalar(beta), static_cast<float>(beta)
_SCALAR_WRAP = re.compile(
    r"(?:(?:c10::|at::)?Scalar|static_cast\s*<[^<>]*>|std::optional\s*<[^<>]*>)\s*\((.*)\)\Z",
    re.S,
)
_NOT_NAMES = frozenset(
    [
        "if",
        "for",
        "while",
        "switch",
        "return",
        "sizeof",
        "true",
        "false",
        "nullptr",
        "this",
        "const",
        "auto",
        "static_cast",
        "const_cast",
        "reinterpret_cast",
        "bool",
        "int",
        "char",
        "float",
        "double",
        "void",
        "unsigned",
        "long",
        "short",
        "int64_t",
        "int32_t",
        "uint32_t",
        "uint64_t",
        "size_t",
    ]
)
_MAX_DEPTH = 6
# per tree read: the same locals and conditions are read once per frame, not once per use
# (keyed by the id of a source or frame that the walk keeps alive, and cleared with it)
_ASSIGNED: dict[tuple[int, int, str, int], list[tuple[int, str]] | None] = {}
_REACHED: dict[tuple[int, int, int], Cond] = {}
_SUBSTITUTED: dict[tuple[int, str, int], tuple[_Frame, str]] = {}


@dataclass(frozen=True)
class _Fn:
    """A function defined in a host file."""

    name: str
    params: tuple[str, ...]
    types: tuple[str, ...]
    defaults: tuple[str | None, ...]
    lo: int  # the body, inside its braces
    hi: int
    src: CppText = field(repr=False)

    @property
    def where(self) -> str:
        return f"{Path(self.src.path).name}:{self.src.line_of(self.lo)}"


@dataclass(frozen=True)
class Found:
    """One entry's launch of a kernel: its operator, or why not (``unknown``)."""

    kernel: str
    op: str | None
    via: str
    alpha: str | None = None
    bound: tuple[tuple[str, str], ...] = ()
    unknown: str | None = None


@dataclass(frozen=True)
class _Frame:
    fn: _Fn
    binding: tuple[tuple[str, str], ...]  # parameter -> its value in the entry's terms
    cond: Cond  # under what the entry gets here, in the entry's terms
    trail: tuple[str, ...]


def _functions(root: Path) -> dict[str, list[_Fn]]:
    found: dict[str, list[_Fn]] = {}
    for path in sorted(root.glob(paths.OPERATIONS_MM)):
        try:
            src = lex(path.read_text(encoding="utf-8", errors="replace"), str(path))
            items, _ = scan(src)
        except ParseError:
            continue  # the .mm reader reports the file; nothing here is read from it
        for item in items:
            fn = _function(src, item.start, item.body) if item.kind == "block" else None
            if fn is not None:
                found.setdefault(fn.name, []).append(fn)
    return found


def _function(src: CppText, start: int, body: tuple[int, int] | None) -> _Fn | None:
    if body is None:
        return None
    header = src.masked[start : body[0]]
    impl = _IMPL_FUNC.search(header)
    if impl is not None:
        name, open_ = impl.group(1), start + impl.end() - 1
    else:
        depth, open_ = 0, -1
        for i, ch in enumerate(header):
            depth += (ch == "<") - (ch == ">" and depth > 0)
            if ch == "(" and depth == 0:
                open_ = start + i
                break
        named = _NAME.search(src.masked[start:open_]) if open_ >= 0 else None
        if named is None or _NOT_FUNCTION.search(src.masked[start:open_]):
            return None
        name = re.sub(r"\s", "", named.group(1)).rsplit("::", 1)[-1]
    close = match_close(src.masked, open_, src.path, src)
    inner = src.code[open_ + 1 : close]
    params = [p for p in split_args(inner, templates=True) if p] if inner.strip() else []
    defaults = tuple(p.split("=", 1)[1].strip() if "=" in p else None for p in params)
    return _Fn(
        name,
        param_names(params),
        tuple(param_type(p) for p in params),
        defaults,
        body[0] + 1,
        body[1],
        src,
    )


# ---- values in the entry's terms -----------------------------------------------------


def _assignments(fn: _Fn, name: str, pos: int) -> list[tuple[int, str]] | None:
    """(offset, right-hand side) of each ``name = ...`` in ``fn`` before ``pos``; None when
    it is changed otherwise (``+=``, ``++``)."""
    key = (id(fn.src), fn.lo, name, pos)
    if key not in _ASSIGNED:
        _ASSIGNED[key] = _find_assignments(fn, name, pos)
    return _ASSIGNED[key]


def _reach(fn: _Fn, pos: int) -> Cond:
    key = (id(fn.src), fn.lo, pos)
    if key not in _REACHED:
        _REACHED[key] = reach(fn.src, fn.lo, fn.hi, pos)
    return _REACHED[key]


def _find_assignments(fn: _Fn, name: str, pos: int) -> list[tuple[int, str]] | None:
    code, masked = fn.src.code, fn.src.masked
    out = []
    n = re.escape(name)
    if re.search(
        rf"(?<![\w.>]){n}\s*(?:[-+*/%&|^]=|\+\+|--)|(?:\+\+|--){n}\b", masked[fn.lo : pos]
    ):
        return None
    for m in re.finditer(rf"(?<![\w.>:]){n}\s*=(?!=)", masked[fn.lo : pos]):
        at = fn.lo + m.end()
        end = at
        depth = 0
        while end < pos:
            ch = masked[end]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch in ";," and depth == 0:
                break
            end += 1
        out.append((fn.lo + m.start(), " ".join(code[at:end].split())))
    return out


def _render(c: Cond) -> str:
    """``c`` as C++ text, to stand in a substituted expression."""
    if isinstance(c, host_cond.Const):
        return "true" if c.value else "false"
    if isinstance(c, host_cond.Text):
        return f"({c.text})"
    if isinstance(c, host_cond.Not):
        return f"!{_render(c.item)}"
    join = " && " if isinstance(c, host_cond.AllOf) else " || "
    return "(" + join.join(_render(i) for i in c.items) + ")"


def subst(frame: _Frame, text: str, pos: int, depth: int = 0) -> str:
    """``text`` of ``frame``'s function with its parameters and locals as the entry's
    expressions; a local assigned under conditions is a ``?:`` of them (``$name``: not
    read)."""
    key = (id(frame), text, pos)
    if key not in _SUBSTITUTED:
        # the frame is kept with its value: a frame collected would free its id for another
        _SUBSTITUTED[key] = (frame, _subst(frame, text, pos, depth))
    return _SUBSTITUTED[key][1]


def _subst(frame: _Frame, text: str, pos: int, depth: int) -> str:
    binding = dict(frame.binding)
    out = []
    tokens = _TOKEN.findall(text)
    for k, t in enumerate(tokens):
        prev = tokens[k - 1] if k else ""
        nxt = tokens[k + 1] if k + 1 < len(tokens) else ""
        plain = re.fullmatch(r"[A-Za-z_]\w*", t) and t not in _NOT_NAMES
        if not plain or prev in (".", ">", ":") or nxt in ("(", ":", "<"):
            out.append(t)
        elif t in binding and _assignments(frame.fn, t, pos) == []:
            out.append(f"({binding[t]})")
        else:
            out.append(_local(frame, t, pos, depth, binding.get(t)))
    return _join(out)


def _join(tokens: list[str]) -> str:
    out = ""
    for t in tokens:
        word = re.match(r"[\w\"@%$]", t) is not None
        out += (" " if out and word and re.search(r"[\w\"]\Z", out) else "") + t
    return out


def _local(frame: _Frame, name: str, pos: int, depth: int, start: str | None) -> str:
    """A local's (or a reassigned parameter's, from ``start``) value at ``pos``."""
    found = _assignments(frame.fn, name, pos)
    if found is None or depth > 8:
        return f"${name}"
    value = f"({start})" if start is not None else f"${name}"
    if not found:
        return value
    for k, (at, rhs) in enumerate(found):
        rhs_text = subst(frame, rhs, at, depth + 1)
        before = frame.fn.src.masked[max(frame.fn.lo, at - 40) : at].rstrip()
        if k == 0 and start is None and re.search(r"[\w*&>]\Z", before):
            value = rhs_text  # its declaration: whoever reads it got past it
            continue
        guard = _reach(frame.fn, at)
        if guard == host_cond.TRUE:
            value = rhs_text
        else:
            value = f"({_entry_terms(frame, guard, at, depth + 1)} ? ({rhs_text}) : ({value}))"
    return f"({value})"


def _entry_terms(frame: _Frame, c: Cond, pos: int, depth: int = 0) -> str:
    return _render(_translate(frame, c, pos, depth))


def _translate(frame: _Frame, c: Cond, pos: int, depth: int = 0) -> Cond:
    if isinstance(c, host_cond.Text):
        return parse(subst(frame, c.text, pos, depth))
    if isinstance(c, host_cond.Not):
        return neg(_translate(frame, c.item, pos, depth))
    if isinstance(c, host_cond.AllOf):
        return conj(*(_translate(frame, i, pos, depth) for i in c.items))
    if isinstance(c, host_cond.AnyOf):
        return host_cond.disj(*(_translate(frame, i, pos, depth) for i in c.items))
    return c


def names(expr: str) -> list[tuple[str, Cond]] | None:
    """The kernel names an expression in the entry's terms gives, each with its condition."""
    expr = host_cond.unwrap(expr)
    literal = re.fullmatch(r'"([^"\\]*)"', expr)
    if literal is not None:
        return [(literal.group(1), host_cond.TRUE)]
    t = host_cond.ternary(expr)
    if t is not None:
        c, yes, no = parse(t[0]), names(t[1]), names(t[2])
        if yes is None or no is None:
            return None
        return [(n, conj(c, g)) for n, g in yes] + [(n, conj(neg(c), g)) for n, g in no]
    wrapped = re.fullmatch(r"std::string(?:_view)?\s*\((.*)\)", expr, re.S)
    if wrapped is not None:
        return names(wrapped.group(1))
    cuts = [at for at, op in host_cond.top_level(expr, ("+",)) if op == "+"]
    if not cuts:
        return None
    parts = [expr[a + 1 : b] for a, b in zip([-1, *cuts], [*cuts, len(expr)], strict=True)]
    out: list[tuple[str, Cond]] = [("", host_cond.TRUE)]
    for part in parts:
        each = names(part)
        if each is None:
            return None
        out = [(a + b, conj(ga, gb)) for a, ga in out for b, gb in each]
    return out


def _tensor(expr: str) -> str | None:
    """The entry's tensor parameter ``expr`` is (through casts), if one."""
    return _passed(expr, "%", _TENSOR_CAST)


def _scalar(expr: str) -> str | None:
    """The entry's scalar parameter ``expr`` passes on (``c10::Scalar(beta)``), if one."""
    return _passed(expr, "@", _SCALAR_WRAP)


def _passed(expr: str, sigil: str, wrap: re.Pattern[str]) -> str | None:
    """The parameter marked ``sigil`` that ``expr`` is, under up to four of ``wrap``'s
    casts or wrappers."""
    expr = host_cond.unwrap(expr)
    for _ in range(4):
        m = re.fullmatch(rf"{sigil}(\w+)", expr)
        if m is not None:
            return m.group(1)
        w = wrap.fullmatch(expr)
        if w is None:
            return None
        expr = host_cond.unwrap(next(g for g in w.groups() if g is not None))
    return None


# ---- the walk from an entry ----------------------------------------------------------


@dataclass(frozen=True)
class Schema:
    names: tuple[str, ...]
    tensors: tuple[str, ...]  # the Tensor arguments that are no outputs, in order
    outs: tuple[str, ...]
    flags: tuple[str, ...] = ()  # the bool arguments


def schema_of(text: str) -> Schema | None:
    """A yaml ``func:``'s arguments (``pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *,
    Tensor(a!) out) -> Tensor(a!)``: self, exponent, out), or None when it has no list."""
    open_ = text.find("(")
    close = text.rfind(") ->") if ") ->" in text else text.rfind(")")
    if open_ < 0 or close < open_:
        return None
    names, tensors, outs, flags = [], [], [], []
    for arg in split_args(text[open_ + 1 : close]):
        if arg in ("*", ""):
            continue
        typ, _, name = arg.split("=", 1)[0].strip().rpartition(" ")
        names.append(name)
        if "!" in typ:
            outs.append(name)
        elif typ == "Tensor":
            tensors.append(name)
        elif typ == "bool":
            flags.append(name)
    return Schema(tuple(names), tuple(tensors), tuple(outs), tuple(flags))


@dataclass(frozen=True)
class _Entry:
    fn: _Fn
    native: NativeFunction
    schema: Schema


def _calls(fn: _Fn) -> list[tuple[int, str, list[str]]]:
    """(offset, name, arguments) of every call in ``fn``'s body but library ones
    (``std::string(op)``, ``at::mul_out``): the host's own functions are unqualified or
    in ``mps::``."""
    out = []
    masked = fn.src.masked
    for m in _CALL.finditer(masked, fn.lo, fn.hi):
        method = masked[max(0, m.start() - 40) : m.start()].rstrip().endswith((".", "->"))
        if m.group(2) in _NOT_NAMES or (method and not _EXEC.fullmatch(m.group(2))):
            continue
        if m.group(1) and m.group(1).split("::")[0] not in ("mps", "native"):
            continue
        close = match_close(masked, m.end() - 1, fn.src.path, fn.src)
        inner = fn.src.code[m.end() : close]
        out.append((m.start(2), m.group(2), split_args(inner) if inner.strip() else []))
    return out


@dataclass(frozen=True)
class _Site:
    """An ``exec_KIND_kernel`` call (``kind``), or a call of ``!name`` that no host file
    defines, reached from an entry; ``names``: the kernel names its name argument gives."""

    frame: _Frame
    pos: int
    kind: str
    names: tuple[tuple[str, Cond], ...]


def _walk(frame: _Frame, fns: dict[str, list[_Fn]], sites: list[_Site]) -> None:
    """Every launch reachable from ``frame``."""
    for pos, name, args in _calls(frame.fn):
        exec_ = _EXEC.fullmatch(name)
        if exec_ is not None:
            found = names(subst(frame, args[1], pos)) if len(args) > 1 else None
            sites.append(_Site(frame, pos, exec_.group(1), tuple(found or ())))
            continue
        defs = fns.get(name, [])
        if len(defs) != 1 or name in frame.trail or len(frame.trail) > _MAX_DEPTH:
            if not defs and args and re.fullmatch(r'\w+|"[^"]*"', args[0].strip()):
                found = names(subst(frame, args[0], pos))
                if found:
                    sites.append(_Site(frame, pos, f"!{name}", tuple(found)))
            continue
        callee = defs[0]
        here = _translate(frame, _reach(frame.fn, pos), pos)
        values = []
        for k, p in enumerate(callee.params):
            if k < len(args):
                values.append((p, subst(frame, args[k], pos)))
            elif callee.defaults[k] is not None:
                values.append((p, str(callee.defaults[k])))
            else:
                values.append((p, f"$missing_{p}"))
        inner = _Frame(callee, tuple(values), conj(frame.cond, here), (*frame.trail, name))
        _walk(inner, fns, sites)


def _iterator_args(fn: _Fn, pos: int) -> tuple[str | None, tuple[str, ...]]:
    """The iterator's ``add_output``/``add_input`` arguments before ``pos``, as written."""
    out, inputs = None, []
    for m in _ITER_ARG.finditer(fn.src.masked, fn.lo, pos):
        close = match_close(fn.src.masked, m.end() - 1, fn.src.path, fn.src)
        arg = " ".join(fn.src.code[m.end() : close].split())
        if m.group(1) == "output":
            out = arg if out is None else "!several outputs"
        else:
            inputs.append(arg)
    return out, tuple(inputs)


def _site(root: Path, entry: _Entry, site: _Site, kernel: str) -> Found | None:
    """The operator one launch site runs ``kernel`` for, or why not; None: not ``kernel``."""
    frame, pos, fn = site.frame, site.pos, site.frame.fn
    via = " -> ".join(frame.trail) + f" ({fn.where})"
    mine = [g for n, g in site.names if n == kernel]
    if not mine:
        return None
    if site.kind.startswith("!"):
        why = (
            f"{via}: runs {kernel} through {site.kind[1:]}, which no host file of the tree defines"
        )
        return Found(kernel, None, via, unknown=why)
    open_ = fn.src.masked.index("(", pos)
    close = match_close(fn.src.masked, open_, fn.src.path, fn.src)
    args = split_args(fn.src.code[open_ + 1 : close])
    here = _translate(frame, _reach(fn, pos), pos)
    optional = frozenset(
        p for p, t in zip(entry.fn.params, entry.fn.types, strict=True) if "optional" in t
    )
    decision = host_cond.decide(conj(frame.cond, here, host_cond.disj(*mine)), optional)
    if not decision.runs:
        return None
    what = _operands(entry, frame, pos, args, via)
    if isinstance(what, Found):
        return replace(what, kernel=kernel)
    if decision.unread is not None:
        shown = _shown(decision.unread, 120)
        why = f"{via}: runs {kernel} where `{shown}`, which the tool cannot read"
        return Found(kernel, None, via, unknown=why)
    bound = []
    for param, literal in decision.fixed:
        value = _literal(root, literal)
        if value is None:
            why = f"{via}: {param} == {literal}, whose value the tree's headers do not give"
            return Found(kernel, None, via, unknown=why)
        bound.append((_schema_name(entry, param), value))
    return Found(kernel, entry.native.operator, via, what, tuple(bound))


def _schema_name(entry: _Entry, param: str) -> str:
    return entry.schema.names[entry.fn.params.index(param)]


def _operands(
    entry: _Entry, frame: _Frame, pos: int, args: list[str], via: str
) -> str | None | Found:
    """The schema argument the launch's scalar fills (None: none), or why the launch is no
    run of the operator (its output, operands or scalar are something else)."""
    out, inputs = _iterator_args(frame.fn, pos)
    if out is None:
        return Found("", None, via, unknown=f"{via}: the launch's iterator is not built here")
    value = subst(frame, out, pos)
    wrote = _tensor(value)
    if wrote is None or _schema_name(entry, wrote) not in entry.schema.outs:
        shown = _shown(value)
        why = (
            f"{via}: the launch writes `{shown}`, not {entry.native.full_name}'s output: "
            "the host works on it afterwards"
        )
        return Found("", None, via, unknown=why)
    values = [subst(frame, i, pos) for i in inputs]
    operands = [_tensor(v) for v in values]
    named = tuple(_schema_name(entry, t) if t else "?" for t in operands)
    if named != entry.schema.tensors:
        shown = ", ".join(_shown(v, 40) for v in values)
        why = (
            f"{via}: the kernel's operands ({shown}) are not "
            f"{entry.native.full_name}'s tensors ({', '.join(entry.schema.tensors)}) as they are"
        )
        return Found("", None, via, unknown=why)
    if len(args) < 3:
        return None
    value = subst(frame, args[2], pos)
    if re.fullmatch(r"\(*\s*(?:\$missing_\w+|std::nullopt|c10::nullopt)\s*\)*", value):
        return None
    scalar = _scalar(value)
    if scalar is None:
        why = f"{via}: the kernel's scalar `{args[2]}` is no argument of the operator"
        return Found("", None, via, unknown=why)
    return _schema_name(entry, scalar)


def _shown(value: str, limit: int = 60) -> str:
    """An expression in the entry's terms, as the host would write it, cut short."""
    text = re.sub(r"[@%]", "", " ".join(host_cond.unwrap(value).split()))
    for _ in range(3):  # the parentheses substituting put around names, not a call's
        text = re.sub(r"(?<![\w>])\((\w+)\)", r"\1", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _literal(root: Path, literal: str) -> str | None:
    """A fixed value as a number torch takes: enum constants read from the tree."""
    if literal in ("true", "false"):
        return "1" if literal == "true" else "0"
    if "::" not in literal:
        return literal.removesuffix(".0") if literal.endswith(".0") else literal
    enum, member = literal.split("::")[-2:]
    for folder in ("aten/src/ATen", "c10"):
        for header in sorted((root / folder).rglob("*.h")) if (root / folder).is_dir() else ():
            text = header.read_text(encoding="utf-8", errors="replace")
            if not re.search(rf"\benum\s+(?:class\s+)?{re.escape(enum)}\b", text):
                continue
            code = lex(text, str(header)).code
            m = re.search(rf"\benum\s+(?:class\s+)?{re.escape(enum)}\b[^{{;]*\{{([^}}]*)\}}", code)
            if m is not None:
                return _ordinal(m.group(1), member)
    return None


def _ordinal(members: str, member: str) -> str | None:
    value = -1
    for item in (i.strip() for i in members.split(",")):
        name, _, given = item.partition("=")
        if not name.strip():
            continue
        try:
            value = int(given.strip(), 0) if given.strip() else value + 1
        except ValueError:
            return None
        if name.strip() == member:
            return str(value)
    return None


def _entries(natives: tuple[NativeFunction, ...], fns: dict[str, list[_Fn]]) -> list[_Entry]:
    out = []
    for e in natives:
        name = e.kernel_for("MPS")
        defs = fns.get(name or "", [])
        schema = schema_of(e.schema)
        if len(defs) == 1 and schema is not None and len(schema.outs) == 1:
            out.append(_Entry(defs[0], e, schema))
    return out


def find(root: Path, natives: tuple[NativeFunction, ...], kernel: str) -> list[Found]:
    """Every launch of ``kernel`` from an MPS row's out= function of the tree's host files."""
    out = []
    unread = []
    for entry, site in _sites(root, natives):
        if site.kind.startswith("?"):
            unread.append(f"{entry.fn.name} ({entry.fn.where}) could not be read: {site.kind[1:]}")
            continue
        found = _site(root, entry, site, kernel)
        if found is not None:
            out.append(found)
    if not out and unread:
        return [Found(kernel, None, unread[0].split(" ", 1)[0], unknown="; ".join(unread))]
    return out


_SITES: dict[tuple[object, ...], list[tuple[_Entry, _Site]]] = {}


def _sites(root: Path, natives: tuple[NativeFunction, ...]) -> list[tuple[_Entry, _Site]]:
    """Every launch site of every entry, read once per tree (kept while its files are)."""
    files = sorted(root.glob(paths.OPERATIONS_MM))
    key = (root, id(natives), tuple((f, f.stat().st_mtime_ns, f.stat().st_size) for f in files))
    if key in _SITES:
        return _SITES[key]
    for memo in (_SITES, _ASSIGNED, _REACHED, _SUBSTITUTED):
        memo.clear()
    fns = _functions(root)
    out = []
    for entry in _entries(natives, fns):
        if len(entry.fn.params) != len(entry.schema.names):
            continue
        binding = tuple(
            (p, (TENSOR if "Tensor" in t else SCALAR) + p)
            for p, t in zip(entry.fn.params, entry.fn.types, strict=True)
        )
        sites: list[_Site] = []
        try:
            _walk(_Frame(entry.fn, binding, host_cond.TRUE, (entry.fn.name,)), fns, sites)
        except (ParseError, ValueError) as exc:
            # a damaged body: whatever it launches is unknown, and says where it stopped
            sites = [_Site(_Frame(entry.fn, binding, host_cond.TRUE, ()), -1, f"?{exc}", ())]
        out += [(entry, s) for s in sites]
    _SITES[key] = out
    return out
