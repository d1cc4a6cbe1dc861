"""Internal: what a stored value may be: JSON that comes back from the store equal to itself."""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from typing import Any, NamedTuple

import msgspec
import msgspec.inspect

from turnstore.errors import InvalidInput, NotJsonValue
from turnstore.records.base import I64_MIN, U64_MAX

MAX_DEPTH = 64
"""Deepest nesting of lists and objects a stored value may have."""


class _Refused(Exception):
    """A value that would not come back equal; `path` grows as the walk unwinds."""

    def __init__(self, reason: str, *, of_type: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.of_type = of_type  # a type JSON cannot hold (json.dumps's TypeError), not a value
        self.path: list[str] = []


class _Field(NamedTuple):
    """What the walk needs of one field of a record type."""

    name: str
    may_be_bytes: bool
    any_value: bool
    record: str | None
    """The record the field holds (or holds a list of), named; None if it holds none."""
    in_list: bool


@cache
def _fields(cls: type[msgspec.Struct]) -> tuple[_Field, ...]:
    """Each field of a record type, as the walk needs it."""
    return tuple(_field(field.name, field.type) for field in msgspec.structs.fields(cls))


def _field(name: str, annotation: Any) -> _Field:
    info = msgspec.inspect.type_info(annotation)
    in_list = isinstance(info, msgspec.inspect.ListType)
    record = _record_name(info.item_type if isinstance(info, msgspec.inspect.ListType) else info)
    text = repr(annotation)
    return _Field(name, "bytes" in text, "Any" in text, record, in_list)


def _record_name(info: msgspec.inspect.Type) -> str | None:
    """The record a field's type expects, when it expects records and never a free dict."""
    choices = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    records = [c.cls.__name__ for c in choices if isinstance(c, msgspec.inspect.StructType)]
    free = (msgspec.inspect.DictType, msgspec.inspect.AnyType)
    if not records or any(isinstance(choice, free) for choice in choices):
        return None
    return " or ".join(records)


def _record_expected(field: _Field, item: object) -> None:
    """Refuse a dict where `field` expects a record: decoding would coerce it silently and
    drop its unknown keys."""
    if field.in_list and type(item) is list:
        for index, element in enumerate(item):
            if type(element) is dict:
                refused = _Refused(f"is a dict where a {field.record} record is expected")
                refused.path.append(f"[{index}]")
                raise refused
    elif type(item) is dict:
        raise _Refused(f"is a dict where a {field.record} record is expected")


def _text(value: str) -> None:
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise _Refused("is not UTF-8 text (it holds a lone surrogate)") from None


def _walk(value: object, depth: int, in_any: bool) -> None:
    """Refuse what JSON would silently change; records only where their type is declared."""
    kind = type(value)
    if kind is str:
        _text(value)  # type: ignore[arg-type]
        return
    if kind is bool or value is None:
        return
    if kind is int:
        if not I64_MIN <= value <= U64_MAX:  # type: ignore[operator]
            raise _Refused("is an integer outside 64 bits")
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _Refused("is not a finite number")
        return
    if depth >= MAX_DEPTH:
        raise _Refused(f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            try:
                if type(key) is not str:
                    raise _Refused(f"has a key that is not a string: {key!r:.40}", of_type=True)
                _text(key)
                # Plain text and flags are most leaves: skip the call for them.
                if not ((type(item) is str and item.isascii()) or type(item) is bool):
                    _walk(item, depth + 1, in_any)
            except _Refused as refused:
                if type(key) is str:
                    refused.path.append(f".{key}" if key.isidentifier() else f"[{key!r}]")
                raise
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if type(item) is str and item.isascii():
                continue
            try:
                _walk(item, depth + 1, in_any)
            except _Refused as refused:
                refused.path.append(f"[{index}]")
                raise
        return
    if isinstance(value, msgspec.Struct) and not in_any:
        for field in _fields(type(value)):
            item = getattr(value, field.name)
            if (field.may_be_bytes and type(item) is bytes) or (
                type(item) is str and item.isascii()
            ):
                continue
            try:
                if field.record is not None:
                    _record_expected(field, item)
                _walk(item, depth, field.any_value)
            except _Refused as refused:
                refused.path.append(f".{field.name}")
                raise
        return
    raise _Refused(f"is of type {kind.__name__}, not a JSON value", of_type=True)


def check_value(value: object, what: str, *, record: bool = True) -> None:
    """Refuse a value that would not come back from the store equal to itself.

    JSON values only: dicts with string keys, lists (tuples come back as lists), UTF-8
    strings, integers within 64 bits, finite floats, booleans and None, at most `MAX_DEPTH`
    levels deep; records only in the fields their type declares, and at the top only if
    `record` (a free-form item, such as a context item, loads back as a dict, not a record).
    The error names the path.
    """
    try:
        _walk(value, 0, not (record and isinstance(value, msgspec.Struct)))
    except _Refused as refused:
        path = "".join(reversed(refused.path))
        error = NotJsonValue if refused.of_type else InvalidInput
        raise error(f"{what}: ${path} {refused.reason}") from None
    except RecursionError:
        raise InvalidInput(f"{what} nests too deeply to store") from None


def storable(value: object) -> bool:
    """Whether free JSON in a record's field passes `check_value`, as that field would.

    Walked as the record's walk walks the field: at the record's level, records refused.
    """
    try:
        _walk(value, 0, True)
    except (_Refused, RecursionError):
        return False
    return True


def item_list(items: object, what: str) -> list[Any]:
    """`items` as a list, if it is a list, tuple or other iterable that is not text or a dict."""
    if isinstance(items, str | bytes | bytearray | dict) or not isinstance(items, Iterable):
        raise InvalidInput(f"{what} must be a list of items, not {type(items).__name__}")
    return list(items)
