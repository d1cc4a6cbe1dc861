"""The checks every rule shares: blank text, lengths, integers, types, JSON values."""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from typing import Any, TypeVar

import msgspec

from turnstore.errors import InvalidInput, RecordDecodeError
from turnstore.records.base import I64_MAX, I64_MIN, U64_MAX, decode_json, encode_json

R = TypeVar("R", bound=msgspec.Struct)
T = TypeVar("T")

# Unicode White_Space, which Rust's `str::trim` strips; Python's `str.strip()` also strips the
# information separators U+001C..U+001F, which the contracts do not count as blank.
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def is_blank(value: str) -> bool:
    """Whether `value` is empty or only Unicode White_Space (the contracts' "blank")."""
    return not value.strip(WHITE_SPACE)


def too_long(value: str, limit: int) -> bool:
    """Whether `value` exceeds `limit` UTF-8 bytes, or is not UTF-8 text at all."""
    # A Python string may hold lone surrogates, which no UTF-8 text (and no Rust string) can.
    try:
        return len(value.encode()) > limit
    except UnicodeEncodeError:
        return True


def nonblank(value: object, message: str) -> str:
    """Return `value` if it is a non-blank string, else raise `InvalidInput(message)`."""
    if not isinstance(value, str) or is_blank(value):
        raise InvalidInput(message)
    return value


def nonblank_list(values: object, what: str) -> list[str]:
    """Return `values` as a list if it is a sequence (not a string) of non-blank strings."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidInput(f"{what} must be a list of non-empty strings")
    checked = list(values)
    if not all(isinstance(value, str) and not is_blank(value) for value in checked):
        raise InvalidInput(f"{what} must be a list of non-empty strings")
    return checked


def integer(value: object, message: str, *, low: int = 0, high: int | None = I64_MAX) -> int:
    """Return `value` if it is an int (not a bool) in `low..high`, else raise `InvalidInput`."""
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < low
        or (high is not None and value > high)
    ):
        raise InvalidInput(message)
    return value


def storage_integer(value: object, message: str) -> int:
    """Return `value` if it is a non-negative integer that fits a signed 64-bit column."""
    return integer(value, message)


def require(value: object, type_: type[T], name: str) -> T:
    """Return `value` if it is an instance of `type_`, else raise `InvalidInput`."""
    if not isinstance(value, type_):
        raise InvalidInput(f"{name} must be a {type_.__name__}")
    return value


MAX_DEPTH = 64
"""Deepest nesting of lists and objects a stored value may have."""


class _Refused(Exception):
    """A value that would not come back equal; `path` grows as the walk unwinds."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


@cache
def _fields(cls: type[msgspec.Struct]) -> tuple[tuple[str, bool, bool], ...]:
    """Each field of a record type: its name, whether it may hold bytes, whether it is Any."""
    return tuple(
        (field.name, "bytes" in repr(field.type), "Any" in repr(field.type))
        for field in msgspec.structs.fields(cls)
    )


def _walk(value: object, depth: int, in_any: bool) -> None:
    """Refuse what JSON would silently change; records only where their type is declared."""
    kind = type(value)
    if kind is str:
        if not value.isascii():  # type: ignore[attr-defined]
            try:
                value.encode()  # type: ignore[attr-defined]
            except UnicodeEncodeError:
                raise _Refused("is not UTF-8 text (it holds a lone surrogate)") from None
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
            if type(key) is not str:
                raise _Refused(f"has a key that is not a string: {key!r:.40}")
            try:
                _walk(key, depth, in_any)
                _walk(item, depth + 1, in_any)
            except _Refused as refused:
                refused.path.append(f".{key}" if key.isidentifier() else f"[{key!r}]")
                raise
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            try:
                _walk(item, depth + 1, in_any)
            except _Refused as refused:
                refused.path.append(f"[{index}]")
                raise
        return
    if isinstance(value, msgspec.Struct) and not in_any:
        for name, may_be_bytes, any_field in _fields(type(value)):
            item = getattr(value, name)
            if may_be_bytes and type(item) is bytes:
                continue
            try:
                _walk(item, depth, any_field)
            except _Refused as refused:
                refused.path.append(f".{name}")
                raise
        return
    raise _Refused(f"is of type {kind.__name__}, not a JSON value")


def check_value(value: object, what: str) -> None:
    """Refuse a value that would not come back from the store equal to itself.

    JSON values only: dicts with string keys, lists (tuples come back as lists), UTF-8
    strings, integers within 64 bits, finite floats, booleans and None, at most `MAX_DEPTH`
    levels deep; records only in the fields their type declares. The error names the path.
    """
    try:
        _walk(value, 0, not isinstance(value, msgspec.Struct))
    except _Refused as refused:
        path = "".join(reversed(refused.path))
        raise InvalidInput(f"{what}: ${path} {refused.reason}") from None
    except RecursionError:
        raise InvalidInput(f"{what} nests too deeply to store") from None


def encode(value: object, what: str) -> bytes:
    """Encode `value` as JSON after `check_value`, refusing it with the path named if needed."""
    check_value(value, what)
    try:
        return encode_json(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise RecordDecodeError(f"{what} is not encodable: {error}") from None


def revalidated(record: R) -> tuple[R, bytes]:
    """Return a type-checked copy of `record` and its JSON.

    Record constructors do not check types or ranges, so a record from a caller is encoded
    and decoded again: the decode enforces every annotated type and integer range.
    """
    data = encode(record, type(record).__name__)
    return decode_json(data, type(record)), data


def checked(value: object, type_: type[R], name: str) -> tuple[R, bytes]:
    """Return a caller's record after `require` and `revalidated`, with its JSON."""
    return revalidated(require(value, type_, name))


def encoded_text(value: Any, what: str) -> str:
    """Encode `value` as JSON text for a column."""
    return encode(value, what).decode()
