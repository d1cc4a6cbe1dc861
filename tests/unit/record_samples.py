"""Sample records and hypothesis strategies shared by the unit tests (no database involved)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from turnstore import (
    ActiveExecution,
    Checkpoint,
    Event,
    ExecutionRecord,
    SessionContext,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentMessageEvent,
    AgentReasoningContentDeltaEvent,
    ApprovalCall,
    ContextCompactedEvent,
    ErrorEvent,
    ExecApprovalRequestEvent,
    FrontendEventMsg,
    FrontendNotice,
    FrontendPicker,
    FrontendPreview,
    FrontendRemoveWidget,
    FrontendWidget,
    FrontendWidgetEvent,
    MessageAuthor,
    MessageEvent,
    MessageReply,
    MessageTarget,
    ModelChangedEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepContent,
    ModelStepFailed,
    ModelStepInterrupted,
    ModelStepStartedEvent,
    PickerOption,
    SessionConfiguredEvent,
    SessionFileReference,
    SessionHistoryEvent,
    SessionResumeRequestedEvent,
    TokenCountEvent,
    TokenUsage,
    ToolCall,
    ToolCallBeginEvent,
    ToolCallEndEvent,
    TurnAbortedEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
    UrlCitation,
    UserMessageEvent,
    WarningEvent,
    WebSearchBeginEvent,
    WebSearchEndEvent,
)
from turnstore.records import (
    ActiveModelStep,
    ContextRewrite,
    ExecutionCompletionPhase,
    ExecutionModelPhase,
    ExecutionStats,
    JournalEvent,
    PendingApproval,
    QueueBoundary,
    QueuedMessage,
    SteerBoundary,
    TurnBoundary,
)
from turnstore.rules.messages import new_queued_message

U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
I64_MAX = 2**63 - 1

# --- fixed samples ------------------------------------------------------------------------


def usage(total: int = 10) -> TokenUsage:
    """A token usage with every field set."""
    return TokenUsage(
        input_tokens=total - 4,
        cached_input_tokens=1,
        output_tokens=3,
        reasoning_output_tokens=1,
        total_tokens=total,
    )


def message_event(delivery: str = "turn", text: str = "hello", **extra: Any) -> MessageEvent:
    """A user message event with an attachment and a reply."""
    return MessageEvent(
        author=MessageAuthor(role="user", id="u-1", name="Ada"),
        delivery=delivery,  # type: ignore[arg-type]
        text=text,
        attachments=[
            SessionFileReference(
                file_id="file-1", name="notes.txt", media_type="text/plain", size_bytes=12
            )
        ],
        reply=MessageReply(
            target=MessageTarget(checkpoint_sequence=3, batch_item_count=2), excerpt="earlier"
        ),
        **extra,
    )


def frontend_events() -> dict[str, Any]:
    """One instance of every FrontendEvent variant, keyed by its expected wire tag."""
    return {
        "picker": FrontendPicker(
            title="Pick a model",
            options=[
                PickerOption(id="a", label="A", description="first"),
                PickerOption(id="b", label="B"),
            ],
        ),
        "preview": FrontendPreview(
            id="p-1",
            title="Preview",
            subtitle="sub",
            page_id="page-1",
            update="append",
            events=[{"kind": "line", "text": "x"}, 1, None],
            next="cursor-2",
        ),
        "widget": FrontendWidgetEvent(
            capability="git",
            item=FrontendWidget(
                id="w-1",
                slot="footer",
                text="main",
                tone="success",
                symbol="*",
                icon_only=True,
                progress=0.5,
                content="details",
                action="open",
            ),
        ),
        "remove_widget": FrontendRemoveWidget(capability="git", id="w-1"),
        "notice": FrontendNotice(text="saved", tone="info"),
    }


def event_msgs() -> dict[str, Any]:
    """One instance of every EventMsg variant, keyed by its expected wire tag (seed 003 kinds)."""
    completed = ModelStepCompleted(
        end_turn=True,
        tool_call_ids=["call-1"],
        usage=usage(),
        content=[
            ModelStepContent(
                output_index=0,
                part_index=1,
                phase="final_answer",
                text="See https://example.com",
                annotations=[
                    UrlCitation(
                        url="https://example.com", title="Example", start_index=4, end_index=23
                    )
                ],
            )
        ],
    )
    return {
        "error": ErrorEvent(message="boom"),
        "warning": WarningEvent(message="careful"),
        "session_configured": SessionConfiguredEvent(session_id="s", model_route="openai/gpt"),
        "task_started": TurnStartedEvent(turn_id="t-1", started_at_ms=100),
        "task_complete": TurnCompleteEvent(turn_id="t-1", last_agent_message="done"),
        "turn_aborted": TurnAbortedEvent(turn_id="t-1", reason="interrupted"),
        "user_message": UserMessageEvent(message=message_event(), turn_id="t-1"),
        "agent_message": AgentMessageEvent(
            session_id="s", turn_id="t-1", model_step_id="m-1", message="hi", phase="commentary"
        ),
        "agent_message_content_delta": AgentMessageContentDeltaEvent(
            session_id="s", turn_id="t-1", model_step_id="m-1", delta="héllo→", phase="final_answer"
        ),
        "agent_reasoning_content_delta": AgentReasoningContentDeltaEvent(
            session_id="s", turn_id="t-1", model_step_id="m-1", delta="think"
        ),
        "model_step_started": ModelStepStartedEvent(
            session_id="s", turn_id="t-1", model_step_id="m-1", step_index=0, started_at_ms=110
        ),
        "model_step_completed": ModelStepCompletedEvent(
            session_id="s",
            turn_id="t-1",
            model_step_id="m-1",
            step_index=0,
            started_at_ms=110,
            completed_at_ms=150,
            outcome=completed,
        ),
        "session_history": SessionHistoryEvent(session_id="s", items=[{"role": "user"}]),
        "model_changed": ModelChangedEvent(model_route="anthropic/claude"),
        "session_resume_requested": SessionResumeRequestedEvent(
            session_id="s", context=SessionContext(owner_id="o", workspace_id="w")
        ),
        "tool_call_begin": ToolCallBeginEvent(
            turn_id="t-1", call=ToolCall(call_id="call-1", name="shell", arguments='{"cmd":"ls"}')
        ),
        "tool_call_end": ToolCallEndEvent(
            turn_id="t-1", call_id="call-1", output="a.txt", success=False
        ),
        "exec_approval_request": ExecApprovalRequestEvent(
            id="r-1",
            turn_id="t-1",
            calls=[ApprovalCall(call_id="call-1", name="shell", arguments="{}")],
            reason="writes files",
        ),
        "token_count": TokenCountEvent(total_usage=usage(20), last_usage=usage(10)),
        "context_compacted": ContextCompactedEvent(),
        "web_search_begin": WebSearchBeginEvent(model_step_id="m-1", call_id="ws-1"),
        "web_search_end": WebSearchEndEvent(model_step_id="m-1", call_id="ws-1", query="q"),
        "frontend": FrontendEventMsg(event=FrontendNotice(text="saved")),
    }


def model_step_outcomes() -> dict[str, Any]:
    """Every ModelStepOutcome variant keyed by its wire tag."""
    return {
        "completed": ModelStepCompleted(end_turn=False),
        "failed": ModelStepFailed(message="rate limited"),
        "interrupted": ModelStepInterrupted(),
    }


def queued_message(owner: str = "owner", id: str = "sub-1", boundary: Any = None) -> QueuedMessage:
    """A valid queued message (turn boundary unless given)."""
    boundary = boundary if boundary is not None else TurnBoundary()
    delivery = {TurnBoundary: "turn", SteerBoundary: "steer", QueueBoundary: "queue"}[
        type(boundary)
    ]
    return new_queued_message(owner, id, boundary, message_event(delivery))


def active_execution(**changes: Any) -> ActiveExecution:
    """An active execution with non-zero counters."""
    fields: dict[str, Any] = {
        "submission_id": "sub-1",
        "turn_id": "turn-1",
        "started_at_ms": 1_000,
        "model_calls": 2,
        "tool_calls": 3,
        "failed_tool_calls": 1,
        "usage": usage(),
        "next_model_step": 2,
        "stop_hook_active": False,
        "phase": ExecutionModelPhase(),
    }
    fields.update(changes)
    return ActiveExecution(**fields)


def full_checkpoint() -> Checkpoint:
    """A checkpoint with every optional part filled."""
    return Checkpoint(
        session_id="session-1",
        session_context=SessionContext(
            owner_id="owner", workspace_id="ws", workspace_label="Workspace", origin_label="cli"
        ),
        metadata={"title": "chat", "nested": {"list": [1, 2.5, None, True, "x"]}},
        catalog_visible=False,
        first_user_message="hello",
        model_route="openai/gpt",
        sequence=42,
        context=[{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
        context_epoch=3,
        compaction_count=2,
        last_context_rewrite=ContextRewrite(epoch=3, reasons=["compaction", "scratchpad"]),
        total_usage=usage(100),
        last_usage=usage(10),
        pending_messages=[
            queued_message("owner", "q-1", TurnBoundary()),
            queued_message("owner", "q-2", SteerBoundary(turn_id="turn-1")),
            queued_message("other", "q-1", QueueBoundary()),
        ],
        active_execution=active_execution(
            phase=ExecutionCompletionPhase(last_assistant_message="bye"), stop_hook_active=True
        ),
        active_model_step=ActiveModelStep(model_step_id="m-1", step_index=1, started_at_ms=1_010),
        execution_stats=ExecutionStats(
            run_count=5,
            failed_run_count=1,
            aborted_run_count=1,
            model_calls=9,
            tool_calls=8,
            failed_tool_calls=2,
            elapsed_ms=1234,
            usage=usage(50),
        ),
        pending_tools=[ToolCall(call_id="c-1", name="shell", arguments="{}")],
        pending_approval=PendingApproval(
            submission_id="sub-1",
            turn_id="turn-1",
            request_id="req-1",
            approval_call_ids=["c-1"],
            authorized_call_ids=[],
            calls=[ToolCall(call_id="c-1", name="shell", arguments="{}")],
            reason="writes",
            sandbox_mode="workspace_write",
            network_access="restricted",
            decision_received=True,
        ),
    )


def execution_record(**changes: Any) -> ExecutionRecord:
    """A consistent execution record (elapsed matches the timestamps)."""
    fields: dict[str, Any] = {
        "session_id": "session-1",
        "submission_id": "sub-1",
        "turn_id": "turn-1",
        "started_at_ms": 100,
        "finished_at_ms": 125,
        "elapsed_ms": 25,
        "outcome": "completed",
        "model_calls": 1,
        "tool_calls": 2,
        "failed_tool_calls": 1,
        "usage": usage(),
    }
    fields.update(changes)
    return ExecutionRecord(**fields)


def journal(kinds: list[Any], first_sequence: int = 1) -> list[JournalEvent]:
    """Chronological journal events with consecutive sequences for the given messages."""
    return [
        JournalEvent(
            sequence=first_sequence + index,
            recorded_at_ms=1_000 + index,
            event=Event(submission_id=None, msg=msg),
        )
        for index, msg in enumerate(kinds)
    ]


# --- hypothesis strategies ----------------------------------------------------------------

u64s = st.integers(min_value=0, max_value=U64_MAX)
i64s = st.integers(min_value=I64_MIN, max_value=I64_MAX)
small_u64s = st.integers(min_value=0, max_value=10**12)
texts = st.text(max_size=20)
optional_texts = st.none() | texts

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=I64_MIN, max_value=U64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)

token_usages = st.builds(
    TokenUsage,
    input_tokens=u64s,
    cached_input_tokens=u64s,
    output_tokens=u64s,
    reasoning_output_tokens=u64s,
    total_tokens=u64s,
)
execution_stats = st.builds(
    ExecutionStats,
    run_count=u64s,
    failed_run_count=u64s,
    aborted_run_count=u64s,
    model_calls=u64s,
    tool_calls=u64s,
    failed_tool_calls=u64s,
    elapsed_ms=u64s,
    usage=token_usages,
)
outcomes = st.sampled_from(["completed", "aborted", "failed"])
execution_records = st.builds(
    ExecutionRecord,
    session_id=texts,
    submission_id=texts,
    turn_id=texts,
    started_at_ms=i64s,
    finished_at_ms=i64s,
    elapsed_ms=u64s,
    outcome=outcomes,
    model_calls=u64s,
    tool_calls=u64s,
    failed_tool_calls=u64s,
    usage=token_usages,
)
session_contexts = st.builds(
    SessionContext,
    owner_id=optional_texts,
    workspace_id=optional_texts,
    workspace_label=optional_texts,
    origin_label=optional_texts,
)
tool_calls = st.builds(ToolCall, call_id=texts, name=texts, arguments=texts)
execution_phases = st.just(ExecutionModelPhase()) | st.builds(
    ExecutionCompletionPhase, last_assistant_message=optional_texts
)
active_executions = st.builds(
    ActiveExecution,
    submission_id=texts,
    turn_id=texts,
    started_at_ms=i64s,
    model_calls=u64s,
    tool_calls=u64s,
    failed_tool_calls=u64s,
    usage=token_usages,
    next_model_step=u64s,
    stop_hook_active=st.booleans(),
    phase=execution_phases,
)
active_model_steps = st.builds(
    ActiveModelStep, model_step_id=texts, step_index=u64s, started_at_ms=i64s
)
context_rewrites = st.builds(
    ContextRewrite,
    epoch=u64s,
    reasons=st.lists(st.sampled_from(["context_offloading", "compaction", "scratchpad"])),
)
pending_approvals = st.builds(
    PendingApproval,
    submission_id=texts,
    turn_id=texts,
    request_id=texts,
    approval_call_ids=st.lists(texts, max_size=3),
    authorized_call_ids=st.lists(texts, max_size=3),
    calls=st.lists(tool_calls, max_size=3),
    reason=texts,
    sandbox_mode=st.sampled_from(["read_only", "workspace_write", "danger_full_access"]),
    network_access=st.sampled_from(["restricted", "enabled"]),
    decision_received=st.booleans(),
)
boundaries = (
    st.just(TurnBoundary()) | st.just(QueueBoundary()) | st.builds(SteerBoundary, turn_id=texts)
)
queued_messages = st.builds(
    QueuedMessage,
    owner=texts,
    id=texts,
    boundary=boundaries,
    author=st.builds(
        MessageAuthor,
        role=st.sampled_from(["user", "agent", "system"]),
        id=optional_texts,
        name=optional_texts,
    ),
    message=texts,
    attachments=st.lists(
        st.builds(
            SessionFileReference,
            file_id=texts,
            name=texts,
            media_type=optional_texts,
            size_bytes=st.none() | u64s,
        ),
        max_size=2,
    ),
    reply=st.none()
    | st.builds(
        MessageReply,
        target=st.builds(MessageTarget, checkpoint_sequence=u64s, batch_item_count=u64s),
        excerpt=optional_texts,
    ),
)
checkpoints = st.builds(
    Checkpoint,
    session_id=texts,
    session_context=session_contexts,
    metadata=st.dictionaries(texts, json_values, max_size=4),
    catalog_visible=st.booleans(),
    first_user_message=optional_texts,
    model_route=optional_texts,
    sequence=u64s,
    context=st.lists(json_values, max_size=5),
    context_epoch=u64s,
    compaction_count=u64s,
    last_context_rewrite=st.none() | context_rewrites,
    total_usage=token_usages,
    last_usage=st.none() | token_usages,
    pending_messages=st.lists(queued_messages, max_size=2),
    active_execution=st.none() | active_executions,
    active_model_step=st.none() | active_model_steps,
    execution_stats=execution_stats,
    pending_tools=st.lists(tool_calls, max_size=2),
    pending_approval=st.none() | pending_approvals,
)


def runtime_records() -> dict[str, Any]:
    """One filled instance of every record of the runtime face, keyed by a test id."""
    from turnstore.records import runtime as r

    node = r.SessionNodeRecord(
        node_id="n1",
        parent_node_id=None,
        payload={"role": "user", "parts": [{"kind": "text", "content": "hi", "prune_state": "k"}]},
        timestamp=5,
    )
    graph = r.SessionGraph(nodes=[node], leaf_node_id="n1")
    hydrated = r.HydratedSessionCheckpoint(
        turn_state=r.PersistedTurnState(
            turn_index=2, token_usage=usage(), last_prompt_usage=usage()
        ),
        tool_state={"files": ["a"]},
        plugin_snapshot={"p": 1},
        plugin_snapshot_revision=3,
        execution_state=b"\x00\xff",
    )
    batch = r.QueuedWorkBatch(
        session_id="s",
        batch_id="b",
        position=1,
        boundary="steer",
        items=[{"text": "x"}],
        enqueued_at_ms=10,
        claim_id="c",
        claim_owner_id="w",
        lease_expires_at_ms=20,
    )
    manifest = r.SessionCheckpoint(tool_state_ref="sha256:aa", plugin_snapshot_revision=3)
    return {
        "ModelSpec": r.ModelSpec(name="m", parameters={"t": 0.5}),
        "PersistedSessionConfig": r.PersistedSessionConfig(provider_id="p"),
        "AgentFrameRecord": r.AgentFrameRecord(frame_id="f", agent_name="main", state={"a": 1}),
        "SessionNodeRecord": node,
        "SessionGraph": graph,
        "GraphUnchanged": r.GraphUnchanged(leaf_node_id="n1"),
        "GraphAppend": r.GraphAppend(nodes=[node], leaf_node_id="n1"),
        "GraphReplaceFull": r.GraphReplaceFull(graph=graph),
        "PersistedTurnState": hydrated.turn_state,
        "SessionCheckpoint": manifest,
        "HydratedSessionCheckpoint": hydrated,
        "TokenLedgerEntry": r.TokenLedgerEntry(turn_id="t", model="m", usage=usage()),
        "RuntimeTurnCommitStamp": r.RuntimeTurnCommitStamp(
            session_id="s", turn_id="t", turn_commit_hash="h"
        ),
        "QueuedWorkCompletion": r.QueuedWorkCompletion(claim_id="c", batch_ids=["b"]),
        "RuntimeCommit": r.RuntimeCommit(session_id="s", graph=r.GraphAppend(nodes=[node])),
        "RuntimeCommitResult": r.RuntimeCommitResult(
            head_revision=2, checkpoint_ref="sha256:bb", manifest=manifest
        ),
        "FullGraph": r.FullGraph(),
        "ActivePath": r.ActivePath(leaf_node_id="n1"),
        "PersistedSessionRead": r.PersistedSessionRead(
            session_id="s",
            head_revision=1,
            config=r.PersistedSessionConfig(),
            agent_frames=[],
            current_agent_frame_id="",
            graph=graph,
            checkpoint_ref="sha256:bb",
            checkpoint=hydrated,
            token_ledger=[],
        ),
        "RootRelation": r.RootRelation(),
        "ForkRelation": r.ForkRelation(parent_session_id="p"),
        "SubagentRelation": r.SubagentRelation(parent_session_id="p"),
        "SessionMeta": r.SessionMeta(session_id="s", session_name="n", cwd="/w"),
        "SessionPickerInfo": r.SessionPickerInfo(
            session_id="s",
            cwd=None,
            relation=r.ForkRelation(parent_session_id="p"),
            first_user_message="hi",
            user_message_count=1,
        ),
        "GcReport": r.GcReport(root_count=1, retained_blob_count=2, deleted_blob_count=3),
        "VacuumReport": r.VacuumReport(removed_node_count=4),
        "AttachmentIntent": r.AttachmentIntent(
            attachment_id="a", session_id="s", canonical_uri="/x", intent_at_epoch_ms=1
        ),
        "AttachmentManifestEntry": r.AttachmentManifestEntry(
            attachment_id="a", session_id="s", canonical_uri="/x", intent_at_epoch_ms=1
        ),
        "QueuedWorkBatchDraft": r.QueuedWorkBatchDraft(items=[1]),
        "QueuedWorkBatch": batch,
        "QueuedWorkClaim": r.QueuedWorkClaim(
            session_id="s",
            claim_id="c",
            owner_id="w",
            boundary="steer",
            batches=[batch],
            lease_expires_at_ms=20,
        ),
    }
