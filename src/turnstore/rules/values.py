"""The checks every rule shares: blank text, lengths, integers, types, JSON values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from functools import cache
from typing import Any, TypeVar

import msgspec
import msgspec.inspect
import msgspec.msgpack

from turnstore.errors import InvalidInput, NotJsonValue, RecordDecodeError
from turnstore.records.base import (
    I64_MAX,
    decode_json,
    decode_json_lines,
    encode_json,
    encode_json_lines,
)
from turnstore.records.values import MAX_DEPTH, check_value, item_list, storable

__all__ = ["MAX_DEPTH", "check_value", "item_list"]

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


def text(value: object, name: str) -> str:
    """Return `value` as a plain `str` if it is UTF-8 text, else raise `InvalidInput`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")
    if not value.isascii():
        # A Python string may hold lone surrogates, which no database text column can.
        try:
            value.encode()
        except UnicodeEncodeError:
            raise InvalidInput(f"{name} is not UTF-8 text (it holds a lone surrogate)") from None
    return value if type(value) is str else str.__str__(value)


def collection(values: object, what: str, *, ordered: bool = False) -> list[Any]:
    """Return `values` as a list: a list, tuple, set or other iterable of separate values.

    A string, bytes and a mapping are refused, though Python iterates them: their characters,
    bytes or keys are never what a caller means. With `ordered`, sets are refused too, since
    their order is arbitrary.
    """
    refused: tuple[type, ...] = (str, bytes, bytearray, memoryview, Mapping)
    if ordered:
        refused += (Set,)
    if isinstance(values, refused) or not isinstance(values, Iterable):
        kind = "a list" if ordered else "a list, tuple or set"
        raise InvalidInput(f"{what} must be {kind}, not {type(values).__name__}")
    return list(values)


def json_value(value: T, what: str) -> T:
    """Return `value` unless it is a record where a free JSON value is meant.

    A record would be stored as a JSON object and come back as a dict, not equal to itself.
    """
    if isinstance(value, msgspec.Struct):
        raise NotJsonValue(f"{what}: $ is of type {type(value).__name__}, not a JSON value")
    return value


def nonblank_list(values: object, what: str, *, ordered: bool = False) -> list[str]:
    """Return `values` as a list if it is a collection (see `collection`) of non-blank text."""
    checked = collection(values, what, ordered=ordered)
    if not all(isinstance(value, str) and not is_blank(value) for value in checked):
        raise InvalidInput(f"{what} must be a list of non-empty strings")
    return [text(value, what) for value in checked]


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


def encode(value: object, what: str) -> bytes:
    """Encode `value` as JSON after `check_value`, refusing it with the path named if needed."""
    check_value(value, what)
    try:
        return encode_json(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise RecordDecodeError(f"{what} is not encodable: {error}") from None


def encoded_items(items: list[Any], what: str) -> bytes:
    """Encode a list of items as one JSON array, each item checked as a value of its own.

    Each item may nest `MAX_DEPTH` levels, as a context item may: the list that carries
    them is not a level of theirs.
    """
    for index, item in enumerate(items):
        check_value(json_value(item, f"{what}[{index}]"), f"{what}[{index}]")
    try:
        return encode_json(items)
    except (TypeError, ValueError, OverflowError) as error:
        raise RecordDecodeError(f"{what} is not encodable: {error}") from None


AUTO: Any = object()
"""`revalidated`'s default: take the record type's own `free_fields`."""


def revalidated(record: R, *, free: tuple[str, ...] | object | None = AUTO) -> tuple[R, bytes]:
    """Return a type-checked copy of `record` and its JSON.

    Record constructors do not check types or ranges, so a record from a caller is encoded
    and decoded again: the decode enforces every annotated type and integer range. Where the
    record's type allows (`free_fields`, or `free` named by a caller who knows the record's
    runtime shape), that round trip in msgspec's C code stands in for the Python walk of
    `check_value` over the typed fields, and the walk visits only the fields of free JSON.
    Whatever that does not take goes through the whole walk, which names the path of what it
    refuses: the answer is the same, only slower.
    """
    if free is AUTO:
        free = free_fields(type(record))
    if isinstance(free, tuple):
        found = _round_trip(record, free)
        if found is not None:
            return found
    data = encode(record, type(record).__name__)
    return decode_json(data, type(record)), data


_INTEGER_RANGE = msgspec.msgpack.Encoder()
"""Encodes only to check integers: it refuses those below -2**63 or above 2**64 - 1."""


def round_tripped(record: R, free: tuple[str, ...]) -> tuple[R, bytes] | None:
    """`revalidated`'s one pass in msgspec's C code alone: None where the walk must decide."""
    return _round_trip(record, free)


def _round_trip(record: R, free: tuple[str, ...]) -> tuple[R, bytes] | None:
    """`record` decoded and its JSON, if it comes back equal and its free JSON is storable."""
    try:
        data = encode_json(record)
        decoded = decode_json(data, type(record))
        # msgspec bounds no integer above int64 on decode; MessagePack refuses, in C,
        # exactly the integers beyond 64 bits that the walk refuses.
        _INTEGER_RANGE.encode(record)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None
    # Equal after the round trip: no dict where a record belongs, no NaN, no tuple in a
    # typed field; lone surrogates did not encode.
    if decoded != record:
        return None
    if not all(storable(getattr(record, name)) for name in free):
        return None
    return decoded, data


def round_tripped_all(records: list[R], type_: type[R]) -> list[tuple[R, bytes]] | None:
    """`round_tripped` of a list of fully typed records, in three C calls for the whole list.

    None if any record does not come back equal: the caller then takes each on its own,
    which names what it refuses. Each record's JSON is its own line of one encoding.
    """
    try:
        data = encode_json_lines(records)
        decoded = decode_json_lines(data, type_)
        _INTEGER_RANGE.encode(records)
    except (TypeError, ValueError, OverflowError, RecursionError, RecordDecodeError):
        return None
    if decoded != records:
        return None
    return list(zip(decoded, data.split(b"\n"), strict=False))


@cache
def free_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of a record type that hold free JSON, if its other fields are all typed.

    None when a typed field nests free JSON deeper (a union of records some of which hold
    it, say): such a record is walked whole.
    """
    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        return None
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    free = tuple(field.name for field in info.fields if _free_json(field.type))
    typed = [field for field in info.fields if field.name not in free]
    if not all(_typed(field.type, {cls}) for field in typed):
        return None
    return free


def typed_record(cls: type) -> bool:
    """Whether `cls` is a record none of whose fields, at any depth, may hold free JSON."""
    return free_fields(cls) == ()


def _free_json(info: msgspec.inspect.Type) -> bool:
    """A field of free JSON: `Any`, or a list or dict of it (`metadata`, `context`)."""
    if isinstance(info, msgspec.inspect.ListType):
        info = info.item_type
    elif isinstance(info, msgspec.inspect.DictType):
        info = info.value_type
    return isinstance(info, msgspec.inspect.AnyType)


def _typed(info: msgspec.inspect.Type, seen: set[type]) -> bool:
    if isinstance(info, msgspec.inspect.AnyType | msgspec.inspect.DictType):
        return False
    if isinstance(info, msgspec.inspect.StructType):
        if info.cls in seen:
            return True
        seen.add(info.cls)
        return all(_typed(field.type, seen) for field in info.fields)
    if isinstance(info, msgspec.inspect.UnionType):
        return all(_typed(choice, seen) for choice in info.types)
    if isinstance(info, msgspec.inspect.ListType):
        return _typed(info.item_type, seen)
    return not isinstance(info, msgspec.inspect.CollectionType | msgspec.inspect.Metadata)


def checked(value: object, type_: type[R], name: str) -> tuple[R, bytes]:
    """Return a caller's record after `require` and `revalidated`, with its JSON."""
    return revalidated(require(value, type_, name))


_SORTED = msgspec.json.Encoder(order="sorted")


def canonical(value: Any) -> bytes:
    """A checked JSON value's encoding with sorted keys: the same for the same value in any key
    order, and different for different JSON types (`1`, `1.0` and `true` included)."""
    return _SORTED.encode(value)


def encoded_text(value: Any, what: str) -> str:
    """Encode `value` as JSON text for a column."""
    return encode(value, what).decode()
