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

COMPRESSED = "z:"
"""Prefix of the type tag of a value the LangGraph saver stored zlib-compressed."""
_SINGLE, _POSITIONAL, _KEYWORDS, _METHOD, _PYDANTIC_V1, _PYDANTIC_V2 = range(6)
_NUMPY, _DELTA = 6, 7


def _ext(code: int, data: memoryview) -> Any:
    """An extension's payload as the arguments it carries (a UUID as its text)."""
    if code == _DELTA:
        return _DECODER.decode(data)
    if code == _NUMPY:
        return f"<array of {len(data)} bytes>"
    if code > _DELTA:
        return f"<extension {code}>"
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


def decode_value(value_type: str, data: bytes) -> Any:
    """A stored LangGraph value as JSON-like data; a value it cannot read as a placeholder."""
    try:
        if value_type.startswith(COMPRESSED):
            value_type, data = value_type[len(COMPRESSED) :], zlib.decompress(data)
        if value_type == "msgpack":
            return _DECODER.decode(data)
        if value_type == "json":
            return json.loads(data, object_hook=_revive)
    except (msgspec.DecodeError, ValueError, zlib.error):
        return f"<undecodable {value_type} value of {len(data)} bytes>"
    if value_type == "null":
        return None
    return f"<{value_type} value of {len(data)} bytes>"
