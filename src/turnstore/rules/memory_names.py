"""Where a memory item may be: the namespace labels and keys the store can key rows by.

A put, a read and an import are held to the same rules, so an imported item is one a put
could have written.
"""

from __future__ import annotations

from turnstore.errors import InvalidInput
from turnstore.records.memory import SEPARATOR
from turnstore.rules.validation import identifier

MAX_LABEL = 255
"""The longest namespace label or key, in characters."""
MAX_BYTES = 1024
"""The most UTF-8 bytes a stored namespace, a key or a vector's field may take: with all three
an index entry stays well within PostgreSQL's b-tree limit (about 2.7 kB)."""


def namespace(labels: object, what: str = "namespace") -> tuple[str, ...]:
    """Refuse a namespace that is not a non-empty tuple of labels the store can key by."""
    if not isinstance(labels, tuple) or not labels:
        raise InvalidInput(f"{what} must be a non-empty tuple of strings")
    for one in labels:
        label(one, f"{what} label")
        if SEPARATOR in one:
            raise InvalidInput(f"{what} label {one!r} cannot contain {SEPARATOR!r}")
    check_bytes(SEPARATOR.join(labels), what)
    return labels


def check_bytes(text: str, what: str) -> None:
    """Refuse text that takes more than `MAX_BYTES` bytes of UTF-8."""
    if len(text) * 4 > MAX_BYTES and len(text.encode()) > MAX_BYTES:
        raise InvalidInput(f"{what} takes more than {MAX_BYTES} bytes of UTF-8")


def label(value: object, what: str) -> str:
    """Refuse a label or key that is not 1 to `MAX_LABEL` characters of an identifier."""
    text = identifier(value, what)
    if not text or len(text) > MAX_LABEL:
        raise InvalidInput(f"{what} must be 1 to {MAX_LABEL} characters")
    return text


def key(value: object, what: str = "memory key") -> str:
    """Refuse a key the store cannot key rows by."""
    text = label(value, what)
    check_bytes(text, what)
    return text
