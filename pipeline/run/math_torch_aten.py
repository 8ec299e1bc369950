"""The aten fallback of check-math's references (``math_torch.py``): the one functional
overload of an aten operator the kernel's operands, its alpha and the host's fixed scalars
map onto without a guess, and the call of it.

Run under torch's interpreter beside ``math_torch.py``, which imports it: the standard
library and torch only.
"""

import warnings

import torch

# the schema types an ALPHA kernel's scalar operand can fill (bool is a flag, never one)
NUMBER_TYPES = {"number", "float", "int", "SymInt", "complex"}


def is_reduction(arg):
    """ATen's loss schemas' ``int reduction``: an element-wise kernel is its None (0)."""
    return arg.name == "reduction" and str(arg.type) == "int"


def fits(schema, arity, alpha, bound=(), alpha_arg=None):
    """Whether the kernel's operands map onto ``schema`` without a guess: a functional
    overload returning one Tensor whose Tensor arguments are as many as the kernel's
    operands, whose other arguments all have defaults or are ``bound`` (the host's fixed
    scalars, by name) or a ``reduction`` (None), except (with an alpha) the one number
    argument the alpha fills: ``alpha_arg`` when the host names it. Returns that
    argument's name ("" without alpha), or None."""
    args = schema.arguments
    if any(a.alias_info is not None and a.alias_info.is_write for a in args):
        return None
    if [str(r.type) for r in schema.returns] != ["Tensor"]:
        return None
    tensors = [a for a in args if str(a.type) == "Tensor"]
    others = [a for a in args if str(a.type) != "Tensor"]
    if len(tensors) != arity:
        return None
    given = {name for name, _ in bound}
    if not given <= {a.name for a in others}:
        return None
    free = [a for a in others if a.name not in given and not is_reduction(a)]
    if not alpha:
        return "" if all(a.has_default_value() for a in free) else None
    numbers = [a for a in free if str(a.type) in NUMBER_TYPES]
    if alpha_arg:
        numbers = [a for a in numbers if a.name == alpha_arg]
    if len(numbers) != 1:
        return None
    rest = [a for a in free if a is not numbers[0]]
    return numbers[0].name if all(a.has_default_value() for a in rest) else None


def aten_operator(names, arity, alpha, bound=(), alpha_arg=None):
    """(overload, alpha argument name, None) of the first aten operator of ``names`` that
    exists, when exactly one of its overloads fits (see :func:`fits`); else (None, None,
    why). Later names are tried only when no operator of an earlier one exists."""
    for name in names:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        found = []
        for overload in packet.overloads():
            op = getattr(packet, overload)
            slot = fits(op._schema, arity, alpha, bound, alpha_arg)
            if slot is not None:
                found.append((op, slot))
        if len(found) == 1:
            return found[0][0], found[0][1], None
        if not found:
            why = f"aten.{name} has no overload the kernel's operands map onto"
            return None, None, why + unfilled(packet, arity, alpha, bound)
        shown = ", ".join(str(op) for op, _ in found)
        return None, None, f"ambiguous: the kernel's operands map onto {shown}"
    return None, None, "no OpInfo, torch function or aten operator of that name"


def unfilled(packet, arity, alpha, bound):
    """What keeps the functional overloads with as many Tensor arguments as the kernel has
    operands from fitting: their arguments without a default that no operand, alpha, host
    literal or reduction fills (``; leaky_relu_backward.default needs self_is_result
    (bool)``); "" when no overload has that many Tensor arguments."""
    given = {name for name, _ in bound}
    notes = []
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        args = schema.arguments
        if any(a.alias_info is not None and a.alias_info.is_write for a in args):
            continue
        if sum(str(a.type) == "Tensor" for a in args) != arity:
            continue
        left = [
            a for a in args
            if str(a.type) != "Tensor" and not a.has_default_value()
            and a.name not in given and not is_reduction(a)
        ]  # fmt: skip
        numbers = [a for a in left if str(a.type) in NUMBER_TYPES]
        if alpha and numbers:
            left.remove(numbers[0])  # the alpha's, at best
        if left:
            shown = ", ".join(f"{a.name} ({a.type})" for a in left)
            notes.append(f"{schema.name.removeprefix('aten::')}.{overload} needs {shown}")
    return "; " + "; ".join(notes) if notes else ""


def literal(text, arg):
    """The host's literal as the schema argument's type takes it; a whole number for a
    ``Scalar`` as an int, which promotes no integer tensor to float (the host's
    ``exp.to<float>() == 2.0`` holds for the int 2 too); a ``bool``'s is false or true."""
    if str(arg.type) == "bool":
        return text in ("true", "1")
    value = float(text)
    kind = str(arg.type)
    whole = kind in ("int", "SymInt") or (kind == "number" and value.is_integer())
    return int(value) if whole else value


def bind(op, tensors, slot, alpha, bound=()):
    """``op`` called with ``tensors`` on its Tensor arguments in order, ``alpha`` on its
    argument ``slot``, the ``bound`` literals on theirs and a ``reduction`` of None (0);
    every other argument keeps its default."""
    given = iter(tensors)
    fixed = dict(bound)
    positional, keywords, by_name = [], {}, False
    for a in op._schema.arguments:
        if str(a.type) == "Tensor":
            value = next(given)
        elif a.name == slot:
            value = alpha
        elif a.name in fixed:
            value = literal(fixed[a.name], a)
        elif is_reduction(a):
            value = 0
        else:
            by_name = True  # a default left out: what follows goes by name
            continue
        if a.kwarg_only or by_name:
            keywords[a.name] = value
        else:
            positional.append(value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return op(*positional, **keywords)


def reorder(op, operands):
    """Where each of ``op``'s Tensor arguments is among the kernel's operands, which the host
    names in its own order (``operands``; none: the schema's order, ``range``); None when
    they are not the schema's tensors."""
    names = [a.name for a in op._schema.arguments if str(a.type) == "Tensor"]
    if not operands:
        return range(len(names))
    if sorted(names) != sorted(operands):
        return None
    return [list(operands).index(n) for n in names]
