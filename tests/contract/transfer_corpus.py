"""A store holding every record kind of both contracts, for export and import tests."""

from __future__ import annotations

from typing import Any

from runtime_helpers import chain, entry, make_commit, now_ms, replace, user

from turnstore import (
    BlockingStore,
    Checkpoint,
    Event,
    ExecutionRecord,
    QueuedWorkBatchDraft,
    TimestampedEvent,
)
from turnstore.cli.demo import run_demo
from turnstore.events import WarningEvent
from turnstore.records import (
    AttachmentIntent,
    HydratedSessionCheckpoint,
    SessionMeta,
)

TRICKY_TEXT = 'tab\there, newline\nhere, NUL-free \u2028 é 🧪 "quoted" \\ back'
"""Text that JSON escapes: a value must come back from an export exactly."""


def fill(store: BlockingStore, prefix: str = "") -> list[str]:
    """Write the demo (checkpoints, events, stream metrics, executions, a fork) and a runtime
    session (graph, tombstone, ledger, turn commit, queue, attachments, blobs, meta, state).

    Returns the root session ids written.
    """
    if not prefix:
        run_demo(store)
        store.save_state("demo-session", "memory", {"facts": [TRICKY_TEXT, 1.5, None, True]})
    root = f"{prefix}runtime-session"
    rt = store.runtime(root)
    first = rt.commit_runtime_state(make_commit(root, None, replace(chain("n1", "n2"))))
    rt.enqueue_queued_work(QueuedWorkBatchDraft(items=[{"text": TRICKY_TEXT}]))
    rt.enqueue_queued_work(QueuedWorkBatchDraft(items=[{"text": "later"}]))
    claim = rt.claim_ready_queued_work("worker-a", "turn", lease_ttl_ms=60_000, max_batches=1)
    assert claim is not None
    rt.record_intent(
        AttachmentIntent(
            attachment_id=f"{prefix}att-1",
            session_id=root,
            canonical_uri=f"file:///attachments/{prefix}att-1",
            intent_at_epoch_ms=now_ms(),
        )
    )
    rt.record_intent(
        AttachmentIntent(
            attachment_id=f"{prefix}att-2",
            session_id=root,
            canonical_uri=f"file:///attachments/{prefix}att-2",
            intent_at_epoch_ms=now_ms(),
        )
    )
    commit = make_commit(
        root,
        first.head_revision,
        replace(
            [*chain("n1", "n2"), user("n3", "n2", TRICKY_TEXT), user("side", "n1", "aside")],
            leaf="n3",
        ),
        checkpoint=HydratedSessionCheckpoint(
            tool_state={"cwd": "/work", "note": TRICKY_TEXT},
            plugin_snapshot={"plugins": ["a"]},
            plugin_snapshot_revision=1,
            execution_state=bytes(range(256)),
        ),
        usage_deltas=[entry("turn-1", 42)],
        committed_attachment_ids=[f"{prefix}att-1"],
    )
    rt.commit_runtime_state(
        commit.with_turn_commit("turn-1").completing_queue_claims(claim.completion())
    )
    rt.tombstone_nodes(["side"])
    rt.save_session_meta(SessionMeta(session_id=root, session_name="runtime", model="model-a"))
    store.save_state(root, "cursor", {"at": 3})
    plain = f"{prefix}plain-session"
    checkpoint = Checkpoint.empty(plain)
    checkpoint.context += [{"role": "user", "content": TRICKY_TEXT}]
    checkpoint.sequence += 1
    store.save_with_events(
        checkpoint,
        transcript_delta=[{"role": "user", "content": TRICKY_TEXT}],
        execution=_execution(plain),
        events=[TimestampedEvent(recorded_at_ms=5, event=Event(msg=WarningEvent(message="w")))],
    )
    roots = [root, plain]
    return ["demo-session", *roots] if not prefix else roots


def _execution(session_id: str) -> ExecutionRecord:
    return ExecutionRecord(
        session_id=session_id,
        submission_id="submission-1",
        turn_id="turn-1",
        started_at_ms=100,
        finished_at_ms=110,
        elapsed_ms=10,
        outcome="completed",
    )


def table_counts(store: Any) -> dict[str, int]:
    """How many rows of each table an export of `store` carries, by the export's own lines."""
    import io

    import msgspec

    out = io.BytesIO()
    store.upkeep.export_trees(out)
    counts: dict[str, int] = {}
    for line in out.getvalue().splitlines():
        kind = msgspec.json.decode(line)["kind"]
        counts[kind] = counts.get(kind, 0) + 1
    return counts
