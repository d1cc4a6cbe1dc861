"""Limits of conversation messages and queued messages, checked in the contract's order."""

from __future__ import annotations

from typing import Any

from turnstore.errors import InvalidMessage
from turnstore.records.base import encode_json
from turnstore.records.checkpoint import (
    QueuedMessage,
    QueuedMessageBoundary,
    SteerBoundary,
    boundary_delivery,
)
from turnstore.records.protocol import (
    MAX_MESSAGE_BYTES,
    MessageAuthor,
    MessageEvent,
    SessionFileReference,
)
from turnstore.rules.values import is_blank, too_long

MAX_QUEUED_OWNER_BYTES = 256
"""Longest queued-message owner, in UTF-8 bytes."""
MAX_QUEUED_ID_BYTES = 4 * 1024
"""Longest queued-message id, in UTF-8 bytes."""
MAX_QUEUED_TURN_ID_BYTES = 4 * 1024
"""Longest turn id a steering message names, in UTF-8 bytes."""
MAX_QUEUED_MESSAGE_BYTES = MAX_MESSAGE_BYTES * 2
"""Largest queued message, as the JSON of the event it delivers."""
MAX_ATTACHMENTS = 64
"""Most attachments one message may carry."""


def validate_message_content(
    author: MessageAuthor, message: str, attachments: list[SessionFileReference]
) -> None:
    """Raise `InvalidMessage` when a message is empty, too large or has bad attachments."""
    if author.role not in ("user", "agent", "system"):
        raise InvalidMessage("message author is invalid")
    if too_long(message, MAX_MESSAGE_BYTES):
        raise InvalidMessage("message exceeds the size limit")
    if is_blank(message) and not attachments:
        raise InvalidMessage("message is empty")
    if len(attachments) > MAX_ATTACHMENTS:
        raise InvalidMessage("message has too many attachments")
    if any(is_blank(item.file_id) or is_blank(item.name) for item in attachments):
        raise InvalidMessage("message attachment is invalid")


def validate_queued_message(message: QueuedMessage) -> None:
    """Raise `InvalidMessage` when a queued message breaks a limit (the contract's order)."""
    if is_blank(message.owner) or too_long(message.owner, MAX_QUEUED_OWNER_BYTES):
        raise InvalidMessage("queued message owner is invalid")
    if is_blank(message.id) or too_long(message.id, MAX_QUEUED_ID_BYTES):
        raise InvalidMessage("queued message ID is invalid")
    boundary = message.boundary
    if isinstance(boundary, SteerBoundary) and (
        is_blank(boundary.turn_id) or too_long(boundary.turn_id, MAX_QUEUED_TURN_ID_BYTES)
    ):
        raise InvalidMessage("queued message turn ID is invalid")
    validate_message_content(message.author, message.message, message.attachments)
    if len(encode_json(message.event())) > MAX_QUEUED_MESSAGE_BYTES:
        raise InvalidMessage("queued message is invalid")


def new_queued_message(
    owner: str, id: str, boundary: QueuedMessageBoundary, event: MessageEvent
) -> QueuedMessage:
    """Build a validated queued message from an event whose delivery matches the boundary."""
    if event.delivery != boundary_delivery(boundary) or event.message_target is not None:
        raise InvalidMessage("queued message event is inconsistent")
    queued = QueuedMessage(
        owner=owner,
        id=id,
        boundary=boundary,
        author=event.author,
        message=event.text,
        attachments=list(event.attachments),
        reply=event.reply,
    )
    validate_queued_message(queued)
    return queued


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return ""
    text = part.get("content") if part.get("kind") == "text" else part.get("text")
    return text if isinstance(text, str) else ""


def user_text(message: Any) -> str | None:
    """The text of a user message, or None for anything that is not one.

    A user message is a JSON object with `"role": "user"`, or one with no role whose `content`
    is one (an ADK event: `{"author": …, "content": {"role": "user", "parts": […]}}`). Its text
    is the join of its `parts` (`{"kind": "text", "content": …}`, `{"text": …}`) when it has a
    list of them, else its `content`: a string, or a list of parts (`{"type": "input_text",
    "text": …}`, `{"type": "text", "text": …}`).
    """
    if isinstance(message, dict) and "role" not in message:
        message = message.get("content")
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    parts = message.get("parts")
    content = parts if isinstance(parts, list) else message.get("content")
    if isinstance(content, list):
        return "".join(map(_part_text, content))
    return content if isinstance(content, str) else ""
