"""graph.codec on its own: the stored form follows the hints, decoding checks them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Literal

import orjson
import pytest

from graph.codec import Codec, Converter, DecodeError


@dataclass(frozen=True, slots=True)
class Inner:
    n: int
    when: date | None = None


@dataclass(frozen=True, slots=True)
class Outer:
    name: str
    kind: Literal["a", "b"]
    score: float
    inner: tuple[Inner, ...]
    pairs: tuple[tuple[str, int], ...]
    counts: dict[str, int] = field(default_factory=dict)
    note: str | None = None
    flag: bool = False


DAYS = {date: Converter(date.isoformat, date.fromisoformat)}
LENIENT = Codec(DAYS, absent="default")
STRICT = Codec(DAYS, absent="none")
SAMPLE = Outer("x", "a", 1.5, (Inner(1), Inner(2, date(1987, 3, 1))), (("p", 3),), {"k": 1})


def test_stored_form_is_the_fields_in_order_with_arrays_for_tuples() -> None:
    assert STRICT.encode(SAMPLE) == {
        "name": "x",
        "kind": "a",
        "score": 1.5,
        "inner": [{"n": 1, "when": None}, {"n": 2, "when": "1987-03-01"}],
        "pairs": [["p", 3]],
        "counts": {"k": 1},
        "note": None,
        "flag": False,
    }
    assert STRICT.decode(Outer, orjson.loads(STRICT.dumps(SAMPLE))) == SAMPLE


@dataclass(frozen=True, slots=True)
class Plain:
    n: int
    tags: tuple[str, ...] = ()
    raw: dict[str, object] = field(default_factory=dict)
    pair: tuple[float, bool | None] | None = None


def test_without_special_types_dumps_is_orjsons_own_rendering() -> None:
    plain = Plain(1, ("t",), {"a": [1, {"b": None}]}, (2, None))
    codec = Codec(absent="default")
    assert codec.dumps(plain) == orjson.dumps(codec.encode(plain)) == orjson.dumps(plain)
    assert codec.decode(Plain, orjson.loads(codec.dumps(plain))) == Plain(
        1, ("t",), {"a": [1, {"b": None}]}, (2.0, None)
    )


def test_absent_fields_take_defaults_or_none_by_policy() -> None:
    data = {"name": "x", "kind": "b", "score": 1, "inner": [{"n": 1}], "pairs": [], "extra": 1}
    assert LENIENT.decode(Outer, data) == Outer("x", "b", 1.0, (Inner(1),), ())
    with pytest.raises(DecodeError, match="field 'counts' is missing"):
        STRICT.decode(Outer, data)
    assert STRICT.decode(Inner, {"n": 1}) == Inner(1)  # an X | None field may be absent
    with pytest.raises(DecodeError, match="field 'n' is missing"):
        LENIENT.decode(Inner, {})


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        ({"name": 1}, "field 'name': expected str, got int"),
        ({"kind": "c"}, "field 'kind': 'c' is not one of"),
        ({"score": True}, "field 'score': expected a number, got bool"),
        ({"inner": [{"n": 1}, {"n": True}]}, "field 'inner': item 1: field 'n': expected int"),
        ({"inner": [{"n": 1, "when": "soon"}]}, "field 'when': ValueError: Invalid isoformat"),
        ({"pairs": [["p"]]}, "field 'pairs': item 0: expected 2 items, got 1"),
        ({"counts": {"k": "1"}}, "field 'counts': key 'k': expected int, got str"),
        ({"note": 3}, "field 'note': expected str, got int"),
    ],
)
def test_wrong_types_name_the_path(edit: dict[str, object], where: str) -> None:
    data = {**STRICT.encode(SAMPLE), **edit}
    with pytest.raises(DecodeError, match=where.replace("(", r"\(")):
        STRICT.decode(Outer, data)


def test_not_an_object() -> None:
    with pytest.raises(DecodeError, match="expected an object, got list"):
        STRICT.decode(Outer, [])


def test_checks_run_on_the_built_record() -> None:
    def positive(p: Plain) -> None:
        if p.n < 1:
            raise ValueError("n must be positive")

    codec = Codec(absent="default", checks={Plain: positive})
    with pytest.raises(DecodeError, match="item 0: ValueError: n must be positive"):
        codec.decode(tuple[Plain, ...], [{"n": 0}])


@dataclass(frozen=True, slots=True)
class Unstorable:
    keys: frozenset[str]


def test_unsupported_types_are_refused() -> None:
    with pytest.raises(TypeError, match="unsupported type"):
        STRICT.decode(Unstorable, {"keys": []})
    with pytest.raises(TypeError, match="unsupported union"):
        STRICT.decode(int | str, 1)  # type: ignore[arg-type]
