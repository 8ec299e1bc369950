"""The declarative reader (pipeline.fields.read/dump): a model's fields name a document's
keys, its annotations check their values, and what no field names is refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import pytest

from pipeline.errors import DocumentError
from pipeline.fields import dump, key, read, shown


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
        ({"note": 3}, r"note must be str or null, got int"),
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


@dataclass(frozen=True)
class Tally:
    """A model with a key for readers (``total``) and a check of its own."""

    counts: tuple[int, ...]
    _total: int = field(init=False, repr=False, compare=False,
                        metadata=shown(lambda t: sum(t.counts), "total"))  # fmt: skip

    def __post_init__(self) -> None:
        if any(n < 0 for n in self.counts):
            raise ValueError("counts must not be negative")


def test_a_key_for_readers_is_written_from_the_rest_and_only_type_checked() -> None:
    assert dump(Tally((1, 2))) == {"counts": [1, 2], "total": 3}
    with pytest.raises(DocumentError, match=r"doc.json: total must be int, got NoneType"):
        read(Tally, {"counts": [1]}, "doc.json")
    assert read(Tally, {"counts": [1, 2], "total": 7}, "doc.json") == Tally((1, 2))
    with pytest.raises(DocumentError, match=r"doc.json: total must be int, got str"):
        read(Tally, {"counts": [1], "total": "1"}, "doc.json")


def test_the_models_own_check_is_an_error_where_the_model_is() -> None:
    with pytest.raises(DocumentError, match=r"doc.json: tallies\[1\] counts must not be neg"):
        read(Tallies, {"tallies": [{"counts": [1], "total": 1}, {"counts": [-1], "total": -1}]},
             "doc.json")  # fmt: skip


@dataclass(frozen=True)
class Tallies:
    tallies: tuple[Tally, ...]
    either: Inner | str | None = None


def test_a_union_names_the_error_inside_the_member_the_value_is() -> None:
    data = {"tallies": [], "either": {"name": 1}}
    with pytest.raises(DocumentError, match=r"doc.json: either.name must be str, got int"):
        read(Tallies, data, "doc.json")
    with pytest.raises(DocumentError, match=r"either must be dict or null, got int or must be"):
        read(Tallies, {"tallies": [], "either": 3}, "doc.json")


@dataclass(frozen=True)
class Keyed:
    by_colour: dict[Colour, int]
    names: list[str]
    inner: Inner | None = None


def test_enum_keys_lists_and_an_error_inside_an_optional_model() -> None:
    model = read(Keyed, {"by_colour": {"blue": 2, "red": 1}, "names": ["a"]}, "doc.json")
    assert model == Keyed({Colour.BLUE: 2, Colour.RED: 1}, ["a"])
    assert list(model.by_colour) == [Colour.BLUE, Colour.RED]  # the document's order
    assert dump(model) == {"by_colour": {"blue": 2, "red": 1}, "names": ["a"], "inner": None}
    with pytest.raises(DocumentError, match=r"by_colour\.green is 'green', not one of red, blue"):
        read(Keyed, {"by_colour": {"green": 1}, "names": []}, "doc.json")
    with pytest.raises(DocumentError, match=r"d: inner\.count must be int, got str"):
        read(Keyed, {"by_colour": {}, "names": [], "inner": {"name": "x", "count": "1"}}, "d")
