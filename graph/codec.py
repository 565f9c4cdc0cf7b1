"""One codec for the stored records: frozen dataclass <-> plain JSON values.

Merge records (table rows, ``graph-changes`` messages), topic payload bodies and snapshot rows
are all frozen dataclasses, so their stored form follows from the classes instead of being
written out per record: a dataclass is an object of its fields in declaration order, a tuple
an array, None null, and str, int, float and bool values (a ``Literal``'s among them) are
themselves. That is how orjson renders a dataclass, so a codec with no special types hands
records to orjson as they are (``dumps``). Decoding walks the type hints (``X | None``,
``tuple[...]``, ``dict[str, X]``, nested dataclasses, ``Literal``) and checks every value
(``True`` is not an int; an int is accepted as a float); a decoder is built once per type and
cached, and a type it cannot check (a set, a union of two types) is refused with a TypeError.

Types stored otherwise (a ``date`` as an ISO string, a compact ``DayWindow``) are registered
``Converter``s; a rule across fields is a registered check. Both are given per ``Codec``, so
each family of records keeps its own special forms, and its policy for absent fields:

- ``absent="default"``: a missing field takes its dataclass default (snapshots: a row written
  before a field was added stays readable), and is an error only if it has none;
- ``absent="none"``: a missing ``X | None`` field is None, any other missing field an error
  (merge records: a row is written whole, so a gap is corruption).

Keys a class does not know are ignored, so a newer writer does not break an older reader. A
value that does not fit raises ``DecodeError`` naming the field path; each family turns it
into its own error (``RecordDecodeError``, ``SnapshotFormatError``), which routes the row or
message to a dead letter.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import orjson

T = TypeVar("T")
Fn = Callable[[Any], Any]
_PLAIN = frozenset({str, int, float, bool, type(None)})  # stored as they are
_REQUIRED = object()  # absent-field marker: the field must be present
_DEFAULT = object()  # absent-field marker: leave it to the dataclass default


class DecodeError(ValueError):
    """A JSON value does not fit the type it is decoded as; the message names the field."""


@dataclass(frozen=True, slots=True)
class Converter:
    """The stored form of a special type; ``decode`` may raise KeyError, TypeError or
    ValueError, reported as a ``DecodeError`` of the field holding the value."""

    encode: Fn
    decode: Fn


class Codec:
    """Encoders and decoders of one family of records (see the module docstring)."""

    def __init__(
        self,
        converters: Mapping[Any, Converter] | None = None,
        *,
        absent: Literal["default", "none"],
        checks: Mapping[type, Callable[[Any], None]] | None = None,
    ) -> None:
        self._converters = dict(converters or {})
        self._checks = dict(checks or {})
        self._absent = absent
        self._decoders: dict[Any, Fn] = {}

    def encode(self, value: Any) -> Any:
        """Plain JSON values (dict, list, str, int, float, bool, None) for ``value``."""
        kind = type(value)
        if kind in _PLAIN:
            return value
        if kind in self._converters:
            return self._converters[kind].encode(value)
        if kind is tuple or kind is list:
            if _PLAIN.issuperset(map(type, value)):  # ids, names: no per-item call
                return list(value)
            return [self.encode(x) for x in value]
        if kind is dict:
            if _PLAIN.issuperset(map(type, value.values())):
                return dict(value)
            return {k: self.encode(x) for k, x in value.items()}
        if dataclasses.is_dataclass(kind):
            return {name: self.encode(getattr(value, name)) for name in _names(kind)}
        return value  # anything else in a dict[str, object] column: orjson's to judge

    def dumps(self, value: Any) -> bytes:
        """``orjson.dumps(self.encode(value))``; without special types orjson's own rendering
        of a dataclass is the same bytes, so the record is handed to it directly."""
        return orjson.dumps(self.encode(value) if self._converters else value)

    def decode(self, hint: type[T], data: object) -> T:
        """A value of ``hint`` from plain JSON values; raises ``DecodeError``."""
        decoded: T = _at("", self._decoder(hint), data)
        return decoded

    # ---- decoders --------------------------------------------------------------------------
    def _decoder(self, hint: Any) -> Fn:
        if hint not in self._decoders:
            self._decoders[hint] = self._build_decoder(hint)
        return self._decoders[hint]

    def _build_decoder(self, hint: Any) -> Fn:
        if hint in self._converters:
            return self._converters[hint].decode
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self._dataclass_decoder(hint)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is tuple:
            return self._tuple_decoder(args)
        if origin in (typing.Union, types.UnionType):
            inner = self._decoder(_optional_of(hint))
            return lambda v: None if v is None else inner(v)
        if origin is dict or hint is dict:
            if not args or args[1] in (object, Any):
                return _expect(dict)
            value = self._decoder(args[1])
            return lambda v: {k: _at(f"key {k!r}", value, x) for k, x in _expect(dict)(v).items()}
        if origin is Literal:
            return _literal(args)
        return _leaf(hint)

    def _dataclass_decoder(self, cls: type) -> Fn:
        fields = [(f.name, self._decoder(h), self._when_absent(f, h)) for f, h in _fields(cls)]
        check = self._checks.get(cls)

        def build(raw: object) -> Any:
            data = _expect(dict)(raw)
            kwargs: dict[str, Any] = {}
            for name, decode, absent in fields:
                if name in data:
                    kwargs[name] = _at(f"field {name!r}", decode, data[name])
                elif absent is _REQUIRED:
                    raise DecodeError(f"field {name!r} is missing")
                elif absent is not _DEFAULT:
                    kwargs[name] = absent
            record = cls(**kwargs)
            if check is not None:
                check(record)
            return record

        return build

    def _when_absent(self, f: dataclasses.Field[Any], hint: Any) -> object:
        """What a field missing from the data becomes: see ``absent`` in the module docstring."""
        if self._absent == "none":
            optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
            return None if optional else _REQUIRED
        missing = dataclasses.MISSING
        has_default = f.default is not missing or f.default_factory is not missing
        return _DEFAULT if has_default else _REQUIRED

    def _tuple_decoder(self, args: tuple[Any, ...]) -> Fn:
        as_list = _expect(list)
        if len(args) == 2 and args[1] is Ellipsis:
            item = self._decoder(args[0])
            return lambda v: tuple(_at(f"item {i}", item, x) for i, x in enumerate(as_list(v)))
        items = [self._decoder(a) for a in args]

        def fixed(v: object) -> tuple[Any, ...]:
            values = as_list(v)
            if len(values) != len(items):
                raise DecodeError(f"expected {len(items)} items, got {len(values)}")
            return tuple(
                _at(f"item {i}", d, x) for i, (d, x) in enumerate(zip(items, values, strict=True))
            )

        return fixed


# ---- helpers --------------------------------------------------------------------------------
@functools.cache
def _fields(cls: type) -> list[tuple[dataclasses.Field[Any], Any]]:
    """The dataclass's fields with their resolved type hints (annotations may be strings)."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls)]


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _optional_of(hint: Any) -> Any:
    inner = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(inner) != 1:
        raise TypeError(f"unsupported union {hint!r}: only X | None")
    return inner[0]


def _at(where: str, decode: Fn, value: object) -> Any:
    """``decode(value)``; a failure becomes a DecodeError whose message leads with ``where``
    (so the outermost field comes first) and keeps the error type of a converter's failure."""
    prefix = f"{where}: " if where else ""
    try:
        return decode(value)
    except DecodeError as err:
        raise DecodeError(f"{prefix}{err}") from err
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DecodeError(f"{prefix}{type(err).__name__}: {err}") from err


def _expect(kind: type) -> Fn:
    def check(v: Any) -> Any:
        # bool is an int in Python; a JSON true in an int column is still corruption
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            name = "an object" if kind is dict else kind.__name__
            raise DecodeError(f"expected {name}, got {type(v).__name__}")
        return v

    return check


def _to_float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise DecodeError(f"expected a number, got {type(v).__name__}")
    return float(v)


def _literal(options: tuple[Any, ...]) -> Fn:
    def check(v: Any) -> Any:
        if not any(type(v) is type(o) and v == o for o in options):
            raise DecodeError(f"{v!r} is not one of {options}")
        return v

    return check


def _leaf(hint: Any) -> Fn:
    if hint is float:
        return _to_float
    if hint in (str, int, bool):
        return _expect(hint)
    if hint is object or hint is Any:
        return lambda v: v
    raise TypeError(f"unsupported type {hint!r}")
