"""What `TurnstoreStore` decides without the database: values as JSON text, which items a
filter keeps, which namespaces a listing names, and how similar two texts' vectors are."""

from __future__ import annotations

import json
import math
import operator
import re
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from turnstore.errors import InvalidInput
from turnstore.records.memory import MemoryVector
from turnstore.seam import json_loads, top_field_equal

_FIELD = re.compile(r"[A-Za-z0-9_.-]+")
"""A filter's field name, as LangGraph's `SqliteStore` accepts them (and its tests ask)."""
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def encode_value(value: Mapping[str, Any]) -> str:
    """A value as stored: JSON text, NaN and infinities kept, other types as builtins."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"a memory value must be a mapping, not {type(value).__name__}")
    try:
        return json.dumps(dict(value), ensure_ascii=False, default=msgspec.to_builtins)
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"a memory value must be JSON-like data: {error}") from None


def decode_value(text: str) -> dict[str, Any]:
    """A stored value read back, as `json.loads` reads it (NaN and infinities included)."""
    value: dict[str, Any] = json_loads(text)
    return value


def check_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """A search's filter, its operators checked before anything is read."""
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise InvalidInput("a search filter must be a mapping of field to value")
    for key, wanted in filter.items():
        if not isinstance(key, str) or not _FIELD.fullmatch(key):
            raise InvalidInput(
                f"Invalid filter key: {key!r}. Filter keys must contain only alphanumeric"
                " characters, underscores, dots, and hyphens."
            )
        _check_operators(wanted)
    return dict(filter)


def _check_operators(wanted: object) -> None:
    if isinstance(wanted, Mapping) and any(str(name).startswith("$") for name in wanted):
        unknown = sorted(str(name) for name in wanted if name not in _OPERATORS)
        if unknown:
            raise InvalidInput(f"unknown filter operators {unknown}: use {sorted(_OPERATORS)}")


def matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether a value passes every condition of a filter, as LangGraph's `InMemoryStore` reads
    one (a field's value equal, a nested object containing, a list equal, or operators), a
    dotted field reaching into nested objects when no field has the dotted name itself."""
    return all(_compare(_field(value, key), wanted) for key, wanted in filter.items())


def _field(value: Mapping[str, Any], key: str) -> Any:
    if key in value or "." not in key:
        return value.get(key)
    found: Any = value
    for part in key.split("."):
        if not isinstance(found, Mapping):
            return None
        found = found.get(part)
    return found


def _compare(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(name).startswith("$") for name in wanted):
            return all(_apply(found, name, operand) for name, operand in wanted.items())
        return isinstance(found, Mapping) and all(
            _compare(found.get(name), operand) for name, operand in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(wanted)
            and all(_compare(one, other) for one, other in zip(found, wanted, strict=True))
        )
    return bool(found == wanted)


def _apply(found: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(found == operand)
    if operator == "$ne":
        return bool(found != operand)
    number, bound = _number(found), _number(operand)
    if number is None or bound is None:
        # An ordering of a value that is not a number holds for no item (as in SQL).
        return False
    if operator == "$gt":
        return number > bound
    if operator == "$gte":
        return number >= bound
    if operator == "$lt":
        return number < bound
    return number <= bound


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def texts_equal(filter: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The conditions of a checked filter the store may test in SQL before `keep_row`: a
    top-level field equal to a text (plainly or by `$eq` alone) that the store accepts as one
    (`top_field_equal`). Text equals text only, in JSON as in Python, so a row SQL skips is
    one the filter refuses."""
    found = []
    for key, wanted in filter.items():
        if isinstance(wanted, Mapping) and list(wanted) == ["$eq"]:
            wanted = wanted["$eq"]
        if type(wanted) is not str:
            continue
        try:
            found.append(top_field_equal(key, wanted))
        except InvalidInput:  # a dotted field, or text no database compares as Python does
            continue
    return tuple(found)


def keep_row(filter: Mapping[str, Any]) -> Any:
    """The test a search hands the store: a row's value passes the filter (None: all pass)."""
    if not filter:
        return None
    return lambda row: matches(decode_value(row.value_json), filter)


def listed(
    stored: Sequence[str],
    conditions: Sequence[tuple[str, Sequence[str]]],
    max_depth: int | None,
) -> list[tuple[str, ...]]:
    """The namespaces a listing names: those matching every (prefix or suffix) condition,
    `*` matching any label, cut to `max_depth` labels, distinct, in order."""
    found = [tuple(text.split(".")) for text in stored]
    kept = [ns for ns in found if all(_matching(ns, kind, path) for kind, path in conditions)]
    if max_depth is not None:
        return sorted({ns[:max_depth] for ns in kept})
    return sorted(set(kept))


def _matching(namespace: tuple[str, ...], kind: str, path: Sequence[str]) -> bool:
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False)
    if kind == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    elif kind != "prefix":
        raise InvalidInput(f"unknown namespace match type {kind!r}: use 'prefix' or 'suffix'")
    return all(label == "*" or label == found for found, label in pairs)


def unit_vector(embedding: Sequence[float], dims: int | None) -> bytes:
    """An embedding as stored: float32 components scaled to unit length."""
    if dims is not None and len(embedding) != dims:
        raise InvalidInput(f"an embedding has {len(embedding)} dimensions, not {dims}")
    norm = math.sqrt(math.fsum(x * x for x in embedding)) or 1.0
    return array("f", [x / norm for x in embedding]).tobytes()


def similarity(query: bytes, vectors: Sequence[MemoryVector]) -> float | None:
    """An item's score: the best cosine similarity of its vectors to the query's (None when it
    has none)."""
    if not vectors:
        return None
    asked = array("f")
    asked.frombytes(query)
    best = -math.inf
    for vector in vectors:
        stored = array("f")
        stored.frombytes(vector.vector)
        best = max(best, sum(map(operator.mul, asked, stored)))
    return best
