"""LangGraph's stored values read as JSON-like data, without LangGraph and without running code.

LangGraph's serializer writes msgpack whose extension types name a class and its arguments
(a LangChain message is `(module, "AIMessage", model_dump(), method)`). Reading them back as
objects needs the classes and an allowlist; reading them for display needs neither: each
extension is replaced by the arguments it carries, as LangGraph's own JSON view does, so a
message is its `model_dump()` (which holds its `type`). Pickled values are never loaded.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import msgspec

OPAQUE = "langgraph_value_type"
"""The key of a placeholder for a value not read (pickled, bytes, undecodable)."""
COMPRESSED = "z:"
"""Prefix of the type tag of a value the LangGraph saver stored zlib-compressed."""
MAX_INFLATED = 16 * 2**20
"""The most bytes a compressed value is inflated to when it is read (a conversation page, the
search index): past it the value reads as a placeholder that says so, never searched.
`ConversationRequest.max_value_bytes` sets another bound for one read."""
_SINGLE, _POSITIONAL, _KEYWORDS, _METHOD, _PYDANTIC_V1, _PYDANTIC_V2 = range(6)
_NUMPY, _DELTA = 6, 7


def _ext(code: int, data: memoryview) -> Any:
    """An extension's payload as the arguments it carries (a UUID as its text)."""
    if code == _DELTA:
        return _DECODER.decode(data)
    if code == _NUMPY:
        return opaque("numpy", len(data))
    if code > _DELTA:
        return opaque(f"extension {code}", len(data))
    found = _DECODER.decode(data)
    if not isinstance(found, list | tuple) or len(found) < 3:
        return found
    module, name, argument = found[0], found[1], found[2]
    if code == _SINGLE and (module, name) == ("uuid", "UUID") and isinstance(argument, str):
        hex_ = argument
        return f"{hex_[:8]}-{hex_[8:12]}-{hex_[12:16]}-{hex_[16:20]}-{hex_[20:]}"
    return argument


_DECODER: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(ext_hook=_ext)


def _revive(value: dict[str, Any]) -> Any:
    """A LangChain JSON constructor (`{"lc": 1, "type": "constructor", …}`) as its kwargs."""
    if value.get("lc") == 1 and value.get("type") == "constructor":
        kwargs = value.get("kwargs")
        return kwargs if isinstance(kwargs, dict) else {}
    return value


def decode_value(value_type: str, data: bytes, max_inflated: int = MAX_INFLATED) -> Any:
    """A stored LangGraph value as JSON-like data; a value it cannot read as a placeholder.

    A compressed value is inflated to at most `max_inflated` bytes: a small value that
    inflates a thousandfold must not cost every reader that much memory."""
    try:
        if value_type.startswith(COMPRESSED):
            inflater = zlib.decompressobj()
            inflated = inflater.decompress(data, max_inflated)
            if inflater.unconsumed_tail or not inflater.eof:
                more = bool(inflater.unconsumed_tail) or len(inflated) == max_inflated
                return opaque(value_type, len(data), max_inflated if more else None)
            value_type, data = value_type[len(COMPRESSED) :], inflated
        if value_type == "msgpack":
            return _DECODER.decode(data)
        if value_type == "json":
            return json.loads(data, object_hook=_revive)
    except (msgspec.DecodeError, ValueError, zlib.error, RecursionError):
        # RecursionError: nested past what a decoder follows (about 1,000 levels).
        return opaque(value_type, len(data))
    if value_type == "null":
        return None
    return opaque(value_type, len(data))


def opaque(value_type: str, size: int, inflated_past: int | None = None) -> dict[str, Any]:
    """What a value that is not read shows instead: its type tag and size (never searched),
    and for one that inflates past the bound, that bound."""
    shown: dict[str, Any] = {OPAQUE: value_type, "bytes": size}
    if inflated_past is not None:
        shown["inflates_past"] = inflated_past
    return shown
