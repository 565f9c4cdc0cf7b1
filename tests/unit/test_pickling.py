"""``graph.pickling.by_fields``: the row types the job stores pickle to equal objects (fields
that take no part in equality included), pickles written before still load, and the classes
it cannot serve are refused."""

from __future__ import annotations

import copyreg
import io
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from graph.merge.aggregates import EntityAggregate
from graph.merge.tally import DayWindow, Tally
from graph.pickling import by_fields


def _entity() -> EntityAggregate:
    return EntityAggregate(
        "e:volcker",
        Tally((("Paul Volcker", 3), ("Volcker", 1))),
        Tally((("PERSON", 4),)),
        Tally((("Fed chairman", 2),), overflow=1),
        4,
        2,
        DayWindow(((725430, 3), (725431, 1)), older=2, older_first=725400, older_last=725401),
        version=7,
    )


def test_a_row_round_trips_with_its_fields_outside_equality() -> None:
    entity = _entity()
    back = pickle.loads(pickle.dumps(entity, pickle.HIGHEST_PROTOCOL))
    assert back == entity and back.version == 7  # version takes no part in ==
    assert type(back.days) is DayWindow and back.days.older_first == 725400


class _OldFormat(pickle.Pickler):
    """Pickles a slotted dataclass as the dataclass module did before ``by_fields``."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (EntityAggregate, Tally, DayWindow)):
            return copyreg.__newobj__, (type(obj),), obj.__getstate__()  # type: ignore[attr-defined]
        return NotImplemented


def test_a_pickle_written_before_still_loads() -> None:
    buffer = io.BytesIO()
    _OldFormat(buffer, pickle.HIGHEST_PROTOCOL).dump(_entity())
    old = buffer.getvalue()
    assert old != pickle.dumps(_entity(), pickle.HIGHEST_PROTOCOL)  # the two formats differ
    back = pickle.loads(old)
    assert back == _entity() and back.version == 7


def test_a_class_it_cannot_serve_is_refused() -> None:
    @dataclass
    class Loose:
        a: int

    @dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            assert self.a >= 0

    @dataclass(frozen=True)
    class Derived:
        a: int
        b: int = field(init=False, default=0)

    for cls in (Loose, Checked, Derived):
        with pytest.raises(TypeError, match=cls.__name__):
            by_fields(cls)


@by_fields
@dataclass(frozen=True, slots=True)
class _One:
    only: tuple[int, ...]


def test_a_class_of_one_field_round_trips() -> None:
    assert pickle.loads(pickle.dumps(_One((1, 2)))) == _One((1, 2))
