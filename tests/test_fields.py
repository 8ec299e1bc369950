"""The declarative reader (pipeline.fields.read/dump): a model's fields name a document's
keys, its annotations check their values, and what no field names is refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import pytest

from pipeline.errors import DocumentError
from pipeline.fields import dump, key, read


class Colour(str, Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner:
    name: str
    count: int = 0


@dataclass(frozen=True)
class Outer:
    title: str
    ratio: float
    flag: bool
    colour: Colour
    inners: tuple[Inner, ...]
    by_name: dict[str, Inner]
    pair: tuple[str, int]
    note: str | None
    shown: object
    dashed: int = field(default=7, metadata=key("dashed-key"))


GOOD = {
    "title": "t", "ratio": 2, "flag": True, "colour": "blue",
    "inners": [{"name": "a", "count": 3}, {"name": "b"}],
    "by_name": {"x": {"name": "x"}}, "pair": ["p", 1], "note": None,
    "shown": {"anything": [1]}, "dashed-key": 9,
}  # fmt: skip


def test_reads_every_kind_and_dumps_it_back() -> None:
    model = read(Outer, GOOD, "doc.json")
    assert model == Outer(
        "t", 2.0, True, Colour.BLUE, (Inner("a", 3), Inner("b", 0)), {"x": Inner("x")},
        ("p", 1), None, {"anything": [1]}, 9,
    )  # fmt: skip
    assert isinstance(model.ratio, float)
    again = dump(model)
    assert read(Outer, again, "doc.json") == model
    assert isinstance(again, dict) and again["dashed-key"] == 9 and again["colour"] == "blue"


def test_an_absent_key_is_its_default_or_null() -> None:
    data = {k: v for k, v in GOOD.items() if k not in ("dashed-key", "note")}
    model = read(Outer, data, "doc.json")
    assert (model.dashed, model.note) == (7, None)
    with pytest.raises(DocumentError, match=r"doc.json: title must be str, got NoneType"):
        read(Outer, {k: v for k, v in GOOD.items() if k != "title"}, "doc.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"flag": 1}, r"flag must be bool, got int"),
        ({"ratio": True}, r"ratio must be float or int, got bool"),
        ({"colour": "green"}, r"colour is 'green', not one of red, blue"),
        ({"inners": [{"name": "a", "count": "3"}]}, r"inners\[0\]\.count must be int, got str"),
        ({"inners": [{"name": "a", "extra": 1}]}, r"inners\[0\] has unknown key\(s\) 'extra'"),
        ({"by_name": {"x": {"name": 1}}}, r"by_name\.x\.name must be str, got int"),
        ({"pair": ["p"]}, r"pair must hold 2 items, got 1"),
        ({"note": 3}, r"note must be str, got int"),
        ({"surprise": 1}, r"the top level has unknown key\(s\) 'surprise'"),
    ],
)
def test_a_wrong_value_is_named_where_it_is(change: dict[str, object], message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        read(Outer, {**GOOD, **change}, "doc.json")


def test_not_an_object_at_all() -> None:
    with pytest.raises(DocumentError, match=r"the top level must be dict, got list"):
        read(Inner, [], "doc.json")


def test_an_enum_key_dumps_as_its_value() -> None:
    assert dump({Colour.RED: (Inner("a"),)}) == {"red": [{"name": "a", "count": 0}]}
