"""Shared record base, integer ranges and JSON helpers for every record type."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec

from turnstore.errors import RecordDecodeError

U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
I64_MAX = 2**63 - 1

U64 = Annotated[int, msgspec.Meta(ge=0)]
"""An unsigned 64-bit integer, as the seeds' `u64` and `usize`."""
I64 = Annotated[int, msgspec.Meta(ge=I64_MIN, le=I64_MAX)]
"""A signed 64-bit integer, as the seeds' `i64`."""
U32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
"""An unsigned 32-bit integer, as the seeds' `u32`."""


class Record(msgspec.Struct, kw_only=True):
    """Base of every record: keyword construction, equality by value, JSON with seed names."""

    def to_json(self) -> bytes:
        """Encode this record as JSON with the seeds' serde names."""
        return _ENCODER.encode(self)

    def to_builtins(self) -> Any:
        """Return this record as plain dicts, lists and scalars."""
        return msgspec.to_builtins(self)


_ENCODER = msgspec.json.Encoder()
T = TypeVar("T")


def encode_json(value: object) -> bytes:
    """Encode any record or JSON value to compact JSON bytes."""
    return _ENCODER.encode(value)


def decode_json(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into `type_`, raising `RecordDecodeError` when it does not fit."""
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.DecodeError as error:
        raise RecordDecodeError(
            f"{getattr(type_, '__name__', type_)} does not decode: {error}"
        ) from None


def convert(value: object, type_: type[T]) -> T:
    """Validate plain builtins into `type_`, raising `RecordDecodeError` when they do not fit."""
    try:
        return msgspec.convert(value, type=type_)
    except msgspec.ValidationError as error:
        raise RecordDecodeError(
            f"{getattr(type_, '__name__', type_)} does not decode: {error}"
        ) from None
