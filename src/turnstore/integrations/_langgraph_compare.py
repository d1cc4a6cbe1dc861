"""Internal: how the LangGraph move compares two savers' tuples of one checkpoint.

Savers disagree on details that are not differences: a pair and a list of the same items, a
delta channel's snapshot given again or left out, and the owner a copy into turnstore
records in the metadata. These rules say what is the same.
"""

from __future__ import annotations

from typing import Any

from turnstore.integrations import requires_extra

with requires_extra(__name__, "LangGraph", "langgraph"):
    from langgraph.checkpoint.base import CheckpointTuple

OWNER_KEYS = ("owner_id", "user_id")
"""Metadata keys a thread's owner is taken from (LangGraph copies the config's keys there)."""


def parent_id(item: CheckpointTuple) -> str | None:
    """The id of a checkpoint's parent, or None for a thread's first."""
    return (
        None
        if item.parent_config is None
        else item.parent_config["configurable"].get("checkpoint_id")
    )


IGNORED_METADATA = frozenset(OWNER_KEYS)
"""Metadata keys a copy may add (the owner it recorded); a difference only when both differ."""


def difference(a: CheckpointTuple, b: CheckpointTuple, *, writes: bool) -> str | None:
    """The first field in which two tuples of one checkpoint differ, or None."""
    if parent_id(a) != parent_id(b):
        return f"parent {parent_id(a)} != {parent_id(b)}"
    meta_a, meta_b = dict(a.metadata), dict(b.metadata)
    for key in IGNORED_METADATA:
        if key not in meta_a:
            meta_b.pop(key, None)
    if not same(meta_a, meta_b):
        return f"metadata {meta_a!r} != {meta_b!r}"
    ca: dict[str, Any] = dict(a.checkpoint)
    cb: dict[str, Any] = dict(b.checkpoint)
    unwritten = unwritten_deltas(a)
    for key in sorted(set(ca) | set(cb)):
        if key == "channel_values":
            for channel in sorted(set(ca[key]) | set(cb[key])):
                if channel in unwritten and (channel not in ca[key] or channel not in cb[key]):
                    continue
                if not same(ca[key].get(channel), cb[key].get(channel)):
                    return f"channel_values[{channel!r}]"
        elif not same(ca.get(key), cb.get(key)):
            return f"{key} {ca.get(key)!r} != {cb.get(key)!r}"
    if writes and not same(a.pending_writes or [], b.pending_writes or []):
        return f"pending_writes {a.pending_writes!r} != {b.pending_writes!r}"
    return None


def unwritten_deltas(item: CheckpointTuple) -> set[str]:
    """Delta channels not written since their snapshot, whose value one saver gives again at
    each later checkpoint and another omits.

    `SqliteSaver` stores each checkpoint's values inline, where LangGraph leaves the snapshot
    out after its step; `PostgresSaver` and turnstore key values by channel version, so the
    snapshot comes back while the version stays. The version is compared, so the value is.
    """
    counters = item.metadata.get("counters_since_delta_snapshot") or {}
    return {channel for channel, counts in counters.items() if counts and counts[0] == 0}


def same(a: Any, b: Any) -> bool:
    """Equal as LangGraph's records compare, with a pair and a list of the same items equal
    (savers disagree on which a stored pair comes back as)."""
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)
