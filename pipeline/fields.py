"""One JSON document read at its edge, as torchgen's ``model.py`` reads
native_functions.yaml: each object's keys popped once and checked for their type, and
nothing left over (:meth:`Fields.done`), so a renamed or misspelt field is an error where
the file is read, never a silent default further in.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

from pipeline.errors import DocumentError

_NULL = type(None)
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
