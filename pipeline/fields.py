"""One JSON document read at its edge, as torchgen's ``model.py`` reads
native_functions.yaml: each object's keys popped once and checked for their type, and
nothing left over (:meth:`Fields.done`), so a renamed or misspelt field is an error where
the file is read, never a silent default further in.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import re
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from pipeline.errors import DocumentError

_NULL = type(None)
_MUST = re.compile(r"^(must be .+?)(, got \w+)$")
E = TypeVar("E", bound=Enum)


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("null" if k is _NULL else k.__name__ for k in kinds)


class Fields:
    """The keys of one JSON object of ``doc`` (``results.json``), at ``where`` in it."""

    def __init__(self, data: object, where: str, doc: str) -> None:
        self.where, self.doc = where, doc
        self._left = dict(self._want(data, (dict,), where))

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _want(self, value: object, kinds: tuple[type, ...], where: str) -> Any:
        # bool is an int to isinstance, never to a reader of a document
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise DocumentError(
                self.doc, where or "the top level",
                f"must be {_names(kinds)}, got {type(value).__name__}",
            )  # fmt: skip
        return value

    def pop(self, key: str, *kinds: type) -> Any:
        """The value of ``key`` (absent: null), checked to be one of ``kinds``."""
        return self._want(self._left.pop(key, None), kinds, self._at(key))

    def has(self, key: str) -> bool:
        """Whether ``key`` is there and not read yet."""
        return key in self._left

    def take(self, key: str) -> tuple[object, str]:
        """The value of ``key`` unchecked (absent: null), and where it is: for
        :func:`read`, which checks it against a model's annotation."""
        return self._left.pop(key, None), self._at(key)

    def strings(self, key: str) -> tuple[str, ...]:
        """The list of strings at ``key``."""
        found = self.strings_or_none(key)
        if found is None:
            raise DocumentError(self.doc, self._at(key), "must be list, got NoneType")
        return found

    def strings_or_none(self, key: str) -> tuple[str, ...] | None:
        """The list of strings at ``key``, or None for null."""
        where = self._at(key)
        items = self.pop(key, list, _NULL)
        if items is None:
            return None
        return tuple(self._want(v, (str,), f"{where}[{i}]") for i, v in enumerate(items))

    def enum(self, key: str, kind: type[E]) -> E:
        """The member of ``kind`` the string at ``key`` names."""
        return self.member(key, kind, self.pop(key, str))

    def member(self, key: str, kind: type[E], value: str) -> E:
        """The member of ``kind`` whose value is ``value``, read at ``key``."""
        try:
            return kind(value)
        except ValueError:
            known = ", ".join(str(m.value) for m in kind)
            raise self.error(key, f"is {value!r}, not one of {known}") from None

    def names(self) -> tuple[str, ...]:
        """The keys not read yet, in the document's order: an object keyed by names
        (runners, dtypes) is read by popping each of them."""
        return tuple(self._left)

    def obj(self, key: str) -> Fields:
        """The object at ``key``, as fields of its own."""
        return Fields(self._left.pop(key, None), self._at(key), self.doc)

    def obj_or_none(self, key: str) -> Fields | None:
        """The object at ``key``, as fields of its own, or None for null."""
        found = self.pop(key, dict, _NULL)
        return None if found is None else Fields(found, self._at(key), self.doc)

    def objs(self, key: str) -> list[Fields]:
        """The list of objects at ``key``, each as fields of its own."""
        where = self._at(key)
        return [Fields(v, f"{where}[{i}]", self.doc) for i, v in enumerate(self.pop(key, list))]

    def done(self) -> None:
        """Refuse what was not read: a key this version does not know."""
        if self._left:
            raise DocumentError(
                self.doc, self.where or "the top level",
                f"has unknown key(s) {', '.join(sorted(map(repr, self._left)))}",
            )  # fmt: skip

    def error(self, key: str, problem: str) -> DocumentError:
        """An error about ``key``'s value (which was of the right type)."""
        return DocumentError(self.doc, self._at(key), problem)


# --- the declarative reader: a frozen dataclass names a document's keys --------------------
#
# A model's fields are the document's keys (a field's ``metadata={"key": ...}`` spells one
# that is no Python name), and their annotations the kinds each value is checked against, so
# a key is written once, where the model declares it, and mypy sees every use of it.

D = TypeVar("D")
KEY = "key"


SHOWN = "shown"


def key(name: str) -> dict[str, str]:
    """A field's ``metadata`` for a document key that is not the field's name."""
    return {KEY: name}


def shown(of: Callable[[Any], object], name: str) -> dict[str, object]:
    """The ``metadata`` of a key written for readers, made from the rest of the model by
    ``of`` (a count, a test's full name), in a field declared ``init=False, repr=False,
    compare=False``: :func:`dump` writes it where the field stands, :func:`read` checks its
    type and leaves it (the model makes it again). The field holds nothing (its model's
    property or method is what code reads), so it is named apart from that property,
    ``name`` being the key."""
    return {KEY: name, SHOWN: of}


@functools.cache
def _fields_of(kind: type) -> tuple[tuple[str, str, object, dataclasses.Field[object]], ...]:
    hints = typing.get_type_hints(kind)
    return tuple(
        (f.name, f.metadata.get(KEY, f.name), hints[f.name], f)
        for f in dataclasses.fields(kind)
        if f.init or SHOWN in f.metadata
    )


def schema_of(data: object) -> object:
    """The ``schema`` a document says it is of (None: none, or no object at all), read before
    the rest, so that one of another version is refused for its version, not for its first
    key this version does not know."""
    return data.get("schema") if isinstance(data, dict) else None


def read(kind: type[D], data: object, doc: str, where: str = "") -> D:
    """The ``kind`` (a dataclass) that the JSON object ``data`` holds: each of its fields
    read from the key of its name and checked against its annotation; an absent key is
    the field's default, else null; a key no field names is an error, and so is a
    ValueError from the model's own check of its values (``__post_init__``)."""
    f = Fields(data, where, doc)
    values: dict[str, object] = {}
    for name, json_key, hint, field in _fields_of(typing.cast(type, kind)):
        if SHOWN in field.metadata:  # checked, then left: the model makes it again
            _value(hint, *f.take(json_key), doc)
        elif f.has(json_key) or not _has_default(field):
            values[name] = _value(hint, *f.take(json_key), doc)
    f.done()
    try:
        return typing.cast(Any, kind)(**values)
    except ValueError as exc:  # the model's own check (its __post_init__) refused the values
        raise DocumentError(doc, where or "the top level", str(exc)) from None


def _has_default(field: dataclasses.Field[object]) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )


def _value(hint: object, value: object, where: str, doc: str) -> object:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _one_of(args, value, where, doc)
    if hint is object:  # kept as the document has it: a value only shown, never read into
        return value
    if origin is tuple:
        items = _checked(value, (list,), where, doc)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{where}[{i}]", doc) for i, v in enumerate(items))
        if len(items) != len(args):
            raise DocumentError(doc, where, f"must hold {len(args)} items, got {len(items)}")
        return tuple(
            _value(a, v, f"{where}[{i}]", doc)
            for i, (a, v) in enumerate(zip(args, items, strict=True))
        )
    if origin in (dict, collections.abc.Mapping):
        found = _checked(value, (dict,), where, doc)
        return {k: _value(args[1], v, f"{where}.{k}", doc) for k, v in found.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return read(hint, value, doc, where)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _member(hint, value, where, doc)
    if hint is float:  # JSON writes 2.0 as 2
        return float(_checked(value, (float, int), where, doc))
    if hint is _NULL or hint is None:
        return _checked(value, (_NULL,), where, doc)
    if isinstance(hint, type):
        return _checked(value, (hint,), where, doc)
    raise TypeError(f"{where}: the reader has no rule for {hint!r}")  # a model's mistake


def _one_of(kinds: tuple[object, ...], value: object, where: str, doc: str) -> object:
    if value is None:
        if _NULL in kinds:
            return None
        raise DocumentError(doc, where, "must not be null")
    problems, inside = [], None
    for kind in kinds:
        if kind is _NULL:
            continue
        try:
            return _value(kind, value, where, doc)
        except DocumentError as e:
            problems.append(e.problem)
            # the value is of this kind, wrong further in: that is the error to show
            inside = inside or (e if e.where != where else None)
    if inside is not None:
        raise inside
    if _NULL in kinds:  # "must be int, got str" says "must be int or null, got str"
        problems = [_MUST.sub(r"\1 or null\2", p) for p in problems]
    raise DocumentError(doc, where, " or ".join(dict.fromkeys(problems)))


def _checked(value: object, kinds: tuple[type, ...], where: str, doc: str) -> Any:
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise DocumentError(doc, where, f"must be {_names(kinds)}, got {type(value).__name__}")
    return value


def _member(kind: type[Enum], value: object, where: str, doc: str) -> Enum:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(str(m.value) for m in kind)
        raise DocumentError(doc, where, f"is {value!r}, not one of {known}") from None


def dump(model: object) -> object:
    """The JSON value of a model, as :func:`read` reads it back: a dataclass as an object
    keyed by its fields' keys, an enum as its value, a tuple as a list."""
    if dataclasses.is_dataclass(model) and not isinstance(model, type):
        return {
            json_key: dump(field.metadata[SHOWN](model) if SHOWN in field.metadata
                           else getattr(model, name))
            for name, json_key, _, field in _fields_of(type(model))
        }  # fmt: skip
    if isinstance(model, Enum):
        return model.value
    if isinstance(model, (tuple, list)):
        return [dump(v) for v in model]
    if isinstance(model, collections.abc.Mapping):
        return {(k.value if isinstance(k, Enum) else k): dump(v) for k, v in model.items()}
    return model
