"""Fast pickling for the frozen row types the community job stores by the hundred thousand.

A ``@dataclass(slots=True)`` pickles through ``dataclasses``' generic ``__getstate__`` and
``__setstate__``, which call ``fields()`` and loop over the fields in Python for every object:
at 20,000 articles that was a quarter of a +40 run, spent reading and writing the rows of the
job's state store. ``by_fields`` gives a class a ``__reduce__`` that pickles its field values
as one tuple (read by a C ``attrgetter``) and rebuilds the object through its own generated
``__init__``: the same objects, several times faster either way. Pickles written before keep
loading, through the dataclass ``__setstate__`` they name.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")


def by_fields(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass whose every field is an ``__init__`` argument, with no
    ``__post_init__``) pickled as ``cls(*values)``. Apply it above ``@dataclass``."""
    if not is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: by_fields takes a frozen dataclass")
    names = [f.name for f in fields(cls)]
    if any(not f.init for f in fields(cls)) or hasattr(cls, "__post_init__") or not names:
        raise TypeError(f"{cls.__name__}: by_fields needs every field in __init__, no post-init")
    get = attrgetter(*names)
    if len(names) == 1:

        def __reduce__(self: Any) -> tuple[type[T], tuple[Any, ...]]:
            return (cls, (get(self),))

    else:

        def __reduce__(self: Any) -> tuple[type[T], tuple[Any, ...]]:
            return (cls, get(self))

    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls
