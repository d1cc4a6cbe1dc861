"""Catalog cursors as opaque tokens, shared by the CLI's `--after` and the server's `cursor`."""

from __future__ import annotations

import base64
import binascii

import msgspec

from turnstore.records.checkpoint import SessionCursor


def encode_cursor(cursor: SessionCursor) -> str:
    """The catalog cursor as one printable, shell- and URL-safe token (base64url of its JSON)."""
    return base64.urlsafe_b64encode(msgspec.json.encode(cursor)).rstrip(b"=").decode()


def decode_cursor(token: str) -> SessionCursor:
    """The catalog cursor a token from `encode_cursor` holds; ValueError if it holds none."""
    padded = token + "=" * (-len(token) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded.encode("ascii"))
        return msgspec.json.decode(raw, type=SessionCursor)
    except (binascii.Error, UnicodeEncodeError, msgspec.DecodeError, ValueError) as error:
        raise ValueError(f"{token[:80]!r} is not a catalog cursor") from error
