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


# what reads one value: (the value, where it is, the document) -> the value read
_Reader = Callable[[object, str, str], object]


class _Role(Enum):
    NEEDED = "needed"  # absent: null, which its annotation may refuse
    DEFAULTED = "defaulted"  # absent: the field's default
    SHOWN = "shown"  # checked, then left: the model makes it again


@functools.cache
def _fields_of(kind: type) -> tuple[tuple[str, str, _Reader, _Role, Any], ...]:
    """Per field: its name, its key, its reader, its role and, for a key shown to readers,
    what makes its value from the model."""
    hints = typing.get_type_hints(kind)
    return tuple(
        (
            f.name,
            f.metadata.get(KEY, f.name),
            _reader(hints[f.name]),
            _role(f),
            f.metadata.get(SHOWN),
        )
        for f in dataclasses.fields(kind)
        if f.init or SHOWN in f.metadata
    )


def _role(field: dataclasses.Field[object]) -> _Role:
    if SHOWN in field.metadata:
        return _Role.SHOWN
    if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
        return _Role.NEEDED
    return _Role.DEFAULTED


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
    left, values = f._left, {}
    prefix = f"{where}." if where else ""
    for name, json_key, reader, role, _ in _fields_of(typing.cast(type, kind)):
        if role is _Role.DEFAULTED and json_key not in left:
            continue
        value = reader(left.pop(json_key, None), prefix + json_key, doc)
        if role is not _Role.SHOWN:
            values[name] = value
    f.done()
    try:
        return typing.cast(Any, kind)(**values)
    except ValueError as exc:  # the model's own check (its __post_init__) refused the values
        raise DocumentError(doc, where or "the top level", str(exc)) from None


@functools.cache
def _reader(hint: object) -> _Reader:
    """What reads a value of ``hint``, worked out once per annotation (a document of
    thousands of objects reads each against the same few)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = tuple(_reader(a) for a in args if a is not _NULL)
        nullable = _NULL in args
        return lambda v, where, doc: _one_of(members, nullable, v, where, doc)
    if hint is object:  # kept as the document has it: a value only shown, never read into
        return lambda v, where, doc: v
    if origin in (tuple, list) and (origin is list or (len(args) == 2 and args[1] is Ellipsis)):
        item, make = _reader(args[0]), origin
        return lambda v, where, doc: make(
            item(x, f"{where}[{i}]", doc) for i, x in enumerate(_checked(v, (list,), where, doc))
        )
    if origin is tuple:
        return functools.partial(_fixed, tuple(_reader(a) for a in args))
    if origin in (dict, collections.abc.Mapping):
        name = _reader(args[0])  # str, or an enum whose values name the keys
        value = _reader(args[1])
        return lambda v, where, doc: {
            name(k, f"{where}.{k}", doc): value(x, f"{where}.{k}", doc)
            for k, x in _checked(v, (dict,), where, doc).items()
        }
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        model = hint
        return lambda v, where, doc: read(model, v, doc, where)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return functools.partial(_member, hint)
    if hint is float:  # JSON writes 2.0 as 2
        return lambda v, where, doc: float(_checked(v, (float, int), where, doc))
    if hint is _NULL or hint is None or isinstance(hint, type):
        kinds = (_NULL,) if hint is None else (hint,)
        return lambda v, where, doc: _checked(v, kinds, where, doc)
    raise TypeError(f"the reader has no rule for {hint!r}")  # a model's mistake


def _fixed(items: tuple[_Reader, ...], value: object, where: str, doc: str) -> object:
    found = _checked(value, (list,), where, doc)
    if len(found) != len(items):
        raise DocumentError(doc, where, f"must hold {len(items)} items, got {len(found)}")
    return tuple(
        read_one(v, f"{where}[{i}]", doc)
        for i, (read_one, v) in enumerate(zip(items, found, strict=True))
    )


def _one_of(
    members: tuple[_Reader, ...], nullable: bool, value: object, where: str, doc: str
) -> object:
    if value is None:
        if nullable:
            return None
        raise DocumentError(doc, where, "must not be null")
    problems, inside = [], None
    for member in members:
        try:
            return member(value, where, doc)
        except DocumentError as e:
            problems.append(e.problem)
            # the value is of this kind, wrong further in: that is the error to show
            inside = inside or (e if e.where != where else None)
    if inside is not None:
        raise inside
    if nullable:  # "must be int, got str" says "must be int or null, got str"
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
    if isinstance(model, Enum):
        return model.value
    if model is None or isinstance(model, (str, int, float)):  # most values: asked first
        return model
    if dataclasses.is_dataclass(model) and not isinstance(model, type):
        return {
            json_key: dump(getattr(model, name) if made is None else made(model))
            for name, json_key, _, _, made in _fields_of(type(model))
        }  # fmt: skip
    if isinstance(model, (tuple, list)):
        return [dump(v) for v in model]
    if isinstance(model, collections.abc.Mapping):
        return {(k.value if isinstance(k, Enum) else k): dump(v) for k, v in model.items()}
    return model
