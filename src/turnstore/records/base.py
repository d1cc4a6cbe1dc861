"""Internal: shared record base, integer ranges and JSON helpers for every record type."""

from __future__ import annotations

import json
import threading
from typing import Annotated, Any, NamedTuple, TypeVar

import msgspec

from turnstore.errors import CorruptRecord, RecordDecodeError

U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
I64_MAX = 2**63 - 1

U64 = Annotated[int, msgspec.Meta(ge=0)]
"""An unsigned 64-bit integer (counts, sizes, sequences)."""
I64 = Annotated[int, msgspec.Meta(ge=I64_MIN, le=I64_MAX)]
"""A signed 64-bit integer (times in milliseconds)."""
U32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
"""An unsigned 32-bit integer (format versions)."""


class WriterStats(NamedTuple):
    """Counters of the write path: committed transactions and the writes they carried."""

    transactions: int
    writes: int


class Record(msgspec.Struct, kw_only=True):
    """Base of every record: keyword construction, equality by value, snake_case JSON."""

    def to_json(self) -> bytes:
        """Encode this record as compact JSON."""
        return _ENCODER.encode(self)

    def to_builtins(self) -> Any:
        """Return this record as plain dicts, lists and scalars."""
        return msgspec.to_builtins(self)


_ENCODER = msgspec.json.Encoder()
T = TypeVar("T")

# msgspec builds a type's decoding tables on first use, and two threads doing that at once
# can crash the process (seen with msgspec 0.22 under the crash test). Decoders are therefore
# built once per type, under a lock, and reused.
_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}
_DECODERS_LOCK = threading.Lock()


def _decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    decoder = _DECODERS.get(type_)
    if decoder is None:
        with _DECODERS_LOCK:
            decoder = _DECODERS.get(type_)
            if decoder is None:
                decoder = _DECODERS[type_] = msgspec.json.Decoder(type_)
    return decoder


def json_loads(data: str | bytes) -> Any:
    """What `json.loads(data)` returns, decoded by msgspec (about twice as fast) wherever the
    two decode alike. What msgspec refuses and Python's `json` takes (NaN and infinities, lone
    surrogates, UTF-16 or UTF-32 bytes), and JSON neither takes, is left to `json.loads`."""
    try:
        return _decoder(Any).decode(data)
    except (msgspec.DecodeError, TypeError, UnicodeEncodeError):
        return json.loads(data)


def encode_json(value: object) -> bytes:
    """Encode any record or JSON value to compact JSON bytes."""
    return _ENCODER.encode(value)


def encode_json_lines(values: list[Any]) -> bytes:
    """Encode each value as compact JSON followed by a newline (no JSON text holds one)."""
    return _ENCODER.encode_lines(values)


TOO_DEEP = "nests deeper than a decoder can follow (about 1,000 levels)"
"""Why JSON nested past msgspec's recursion limit does not decode."""


def decode_json_lines(data: bytes, type_: type[T]) -> list[T]:
    """Decode newline-delimited JSON into a list of `type_`; `RecordDecodeError` if one fails."""
    try:
        values: list[T] = _decoder(type_).decode_lines(data)
        return values
    except msgspec.DecodeError as error:
        problem = str(error)
    except RecursionError:
        problem = TOO_DEEP
    raise RecordDecodeError(f"{getattr(type_, '__name__', type_)} does not decode: {problem}")


def decode_json(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into `type_`, raising `RecordDecodeError` when it does not fit."""
    try:
        value: T = _decoder(type_).decode(data)
        return value
    except msgspec.DecodeError as error:
        problem = str(error)
    except RecursionError:
        problem = TOO_DEEP
    raise RecordDecodeError(f"{getattr(type_, '__name__', type_)} does not decode: {problem}")


def convert(value: object, type_: type[T]) -> T:
    """Validate plain builtins into `type_`, raising `RecordDecodeError` when they do not fit."""
    _decoder(type_)  # builds the type's tables under the lock before convert() reads them
    try:
        return msgspec.convert(value, type=type_)
    except msgspec.ValidationError as error:
        raise RecordDecodeError(
            f"{getattr(type_, '__name__', type_)} does not decode: {error}"
        ) from None


def decode_stored(data: bytes | str, type_: type[T], what: str, session_id: str | None = None) -> T:
    """Decode JSON read from the database, raising `CorruptRecord` when it does not fit."""
    try:
        value: T = _decoder(type_).decode(data)
        return value
    except msgspec.DecodeError as error:
        problem = str(error)
    except RecursionError:
        problem = TOO_DEEP
    raise CorruptRecord(f"stored {what} does not decode: {problem}", session_id=session_id)
