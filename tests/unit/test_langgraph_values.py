"""LangGraph's stored values read as JSON-like data without LangGraph: each extension type of
its msgpack replaced by the arguments it carries, nothing unpickled, nothing imported."""

from __future__ import annotations

import json
import pickle
import zlib

import msgspec
import pytest

from turnstore.rules.langgraph_values import OPAQUE, decode_value

PACK = msgspec.msgpack.encode


def ext(code: int, payload: object) -> msgspec.msgpack.Ext:
    return msgspec.msgpack.Ext(code, PACK(payload))


MESSAGE = {"content": "hi", "type": "human", "id": "m1", "additional_kwargs": {}}


def test_a_pydantic_message_reads_as_its_model_dump() -> None:
    stored = [
        ext(5, ("langchain_core.messages.human", "HumanMessage", MESSAGE, "model_validate_json"))
    ]
    assert decode_value("msgpack", PACK(stored)) == [MESSAGE]


@pytest.mark.parametrize(
    ("code", "payload", "expected"),
    [
        (
            0,
            ("uuid", "UUID", "0123456789abcdef0123456789abcdef"),
            "01234567-89ab-cdef-0123-456789abcdef",
        ),
        (0, ("datetime", "date", "2026-12-05"), "2026-12-05"),
        (1, ("builtins", "set", [1, 2]), [1, 2]),
        (2, ("mod", "Point", {"x": 1}), {"x": 1}),
        (
            3,
            ("datetime", "datetime", "2026-12-05T00:00:00", "fromisoformat"),
            "2026-12-05T00:00:00",
        ),
        (4, ("mod", "Old", {"a": 1}), {"a": 1}),
        (7, [1, 2], [1, 2]),
    ],
)
def test_each_extension_reads_as_its_arguments(
    code: int, payload: object, expected: object
) -> None:
    assert decode_value("msgpack", PACK({"v": ext(code, payload)})) == {"v": expected}


def test_nested_extensions_and_non_text_keys() -> None:
    inner = ext(5, ("m", "AIMessage", {"content": "x", "tool_calls": [{"args": {1: "a"}}]}, "m"))
    assert decode_value("msgpack", PACK({"messages": [inner]})) == {
        "messages": [{"content": "x", "tool_calls": [{"args": {1: "a"}}]}]
    }


def test_compressed_and_json_values() -> None:
    packed = zlib.compress(PACK({"a": "b" * 300}))
    assert decode_value("z:msgpack", packed) == {"a": "b" * 300}
    constructor = {"lc": 1, "type": "constructor", "id": ["x", "HumanMessage"], "kwargs": MESSAGE}
    assert decode_value("json", json.dumps([constructor]).encode()) == [MESSAGE]
    assert decode_value("null", b"") is None


def test_what_is_not_read_is_a_placeholder() -> None:
    """Pickles, bytes, arrays and damaged values are never loaded: their type and size show."""
    pickled = pickle.dumps(object())
    assert decode_value("pickle", pickled) == {OPAQUE: "pickle", "bytes": len(pickled)}
    assert decode_value("bytes", b"abc") == {OPAQUE: "bytes", "bytes": 3}
    assert decode_value("msgpack", b"\xc1") == {OPAQUE: "msgpack", "bytes": 1}
    assert decode_value("z:msgpack", b"not zlib") == {OPAQUE: "z:msgpack", "bytes": 8}
    assert decode_value("msgpack", PACK(ext(6, ("<f8", [1], "C", b"12345678")))) == {
        OPAQUE: "numpy",
        "bytes": len(PACK(("<f8", [1], "C", b"12345678"))),
    }


def test_a_compressed_value_inflates_only_to_its_bound() -> None:
    """A small value that inflates a thousandfold reads as a placeholder naming the bound."""
    big = {"a": "b" * 1_000_000}
    packed = zlib.compress(PACK(big), 9)
    assert len(packed) < 5_000
    assert decode_value("z:msgpack", packed, 64 * 1024) == {
        OPAQUE: "z:msgpack",
        "bytes": len(packed),
        "inflates_past": 64 * 1024,
    }
    assert decode_value("z:msgpack", packed, 2_000_000) == big
    # The default bound, 16 MiB: 17 MiB of one letter is past it.
    huge = zlib.compress(PACK("c" * (17 * 2**20)), 9)
    assert decode_value("z:msgpack", huge)["inflates_past"] == 16 * 2**20


def test_a_cut_off_compressed_value_is_a_plain_placeholder() -> None:
    packed = zlib.compress(PACK({"a": "b" * 300}))
    assert decode_value("z:msgpack", packed[:-8]) == {OPAQUE: "z:msgpack", "bytes": len(packed) - 8}


@pytest.mark.parametrize("levels", [1_100, 50_000])
def test_a_value_nested_past_any_decoder_is_a_placeholder(levels: int) -> None:
    """msgpack arrays of one nested past the decoder's recursion limit: no RecursionError."""
    nested = b"\x91" * levels + b"\xc0"
    assert decode_value("msgpack", nested) == {OPAQUE: "msgpack", "bytes": len(nested)}
    as_json = b"[" * levels + b"]" * levels
    assert decode_value("json", as_json) == {OPAQUE: "json", "bytes": len(as_json)}
