"""PostgreSQL schema as an ordered list of migrations; a list index + 1 is a schema version.

JSON is stored as TEXT, not JSONB: JSONB reorders object keys, and a checkpoint must load
exactly as it was saved (the context-append rule compares the encoded bytes of items). Ids
use the "C" collation so the catalog orders ties byte-wise, exactly as SQLite does.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE middleware_state (
        scope TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        value_json TEXT NOT NULL,
        PRIMARY KEY (scope, key)
    );
    CREATE TABLE sessions (
        session_id TEXT COLLATE "C" PRIMARY KEY,
        parent_session_id TEXT COLLATE "C" REFERENCES sessions(session_id),
        parent_sequence BIGINT CHECK (parent_sequence IS NULL OR parent_sequence >= 0),
        latest_sequence BIGINT NOT NULL CHECK (latest_sequence >= 0),
        latest_event_sequence BIGINT NOT NULL DEFAULT 0 CHECK (latest_event_sequence >= 0),
        checkpoint_state_json TEXT NOT NULL,
        context_epoch BIGINT NOT NULL CHECK (context_epoch >= 0),
        context_length BIGINT NOT NULL CHECK (context_length >= 0),
        context_tail BYTEA,
        session_context_json TEXT NOT NULL,
        owner_id TEXT COLLATE "C",
        execution_stats_json TEXT NOT NULL,
        catalog_visible BOOLEAN NOT NULL,
        first_user_message TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        CHECK ((parent_session_id IS NULL) = (parent_sequence IS NULL))
    );
    CREATE TABLE context_chunks (
        session_id TEXT COLLATE "C" NOT NULL
            REFERENCES sessions(session_id) ON DELETE CASCADE,
        start BIGINT NOT NULL CHECK (start >= 0),
        items_json TEXT NOT NULL,
        PRIMARY KEY (session_id, start)
    );
    CREATE TABLE transcript_delta (
        session_id TEXT COLLATE "C" NOT NULL
            REFERENCES sessions(session_id) ON DELETE CASCADE,
        sequence BIGINT NOT NULL CHECK (sequence >= 0),
        -- A batch equal to the context items its save appended is not stored twice: it names
        -- that context chunk instead, and is copied back here before a rewrite drops the chunk.
        items_json TEXT,
        context_start BIGINT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (session_id, sequence),
        CHECK ((items_json IS NULL) <> (context_start IS NULL))
    );
    CREATE TABLE execution_journal (
        session_id TEXT COLLATE "C" NOT NULL
            REFERENCES sessions(session_id) ON DELETE CASCADE,
        sequence BIGINT NOT NULL CHECK (sequence >= 0),
        record_json TEXT NOT NULL,
        started_at_ms BIGINT NOT NULL CHECK (started_at_ms >= 0),
        PRIMARY KEY (session_id, sequence)
    );
    CREATE TABLE event_journal (
        session_id TEXT COLLATE "C" NOT NULL
            REFERENCES sessions(session_id) ON DELETE CASCADE,
        sequence BIGINT NOT NULL CHECK (sequence > 0),
        recorded_at_ms BIGINT NOT NULL CHECK (recorded_at_ms >= 0),
        event_kind TEXT NOT NULL,
        model_step_id TEXT,
        stream_phase TEXT,
        delta_bytes BIGINT CHECK (delta_bytes IS NULL OR delta_bytes >= 0),
        event_json TEXT NOT NULL,
        stream_metrics_json TEXT NOT NULL,
        PRIMARY KEY (session_id, sequence)
    );
    CREATE INDEX sessions_recent_idx
        ON sessions(updated_at DESC, latest_sequence DESC, session_id DESC);
    -- Partial: a save of a session without an owner does not touch this index.
    CREATE INDEX sessions_owner_recent_idx
        ON sessions(owner_id, updated_at DESC, latest_sequence DESC, session_id DESC)
        WHERE owner_id IS NOT NULL;
    CREATE INDEX sessions_parent_idx ON sessions(parent_session_id)
        WHERE parent_session_id IS NOT NULL;
    CREATE INDEX transcript_delta_context_idx ON transcript_delta(session_id)
        WHERE context_start IS NOT NULL;
    CREATE INDEX execution_journal_recent_idx
        ON execution_journal(started_at_ms DESC, session_id DESC, sequence DESC);
    -- Covers the stream-metric read of a completed step, so it touches only that step's rows.
    CREATE INDEX event_journal_step_idx
        ON event_journal(session_id, model_step_id, event_kind, sequence, stream_phase,
                         recorded_at_ms, delta_bytes)
        WHERE model_step_id IS NOT NULL;
    -- event_kind is a key column so SQLite's planner prefers this over the primary key.
    CREATE INDEX event_journal_token_count_idx
        ON event_journal(session_id, event_kind, sequence) WHERE event_kind = 'token_count';
    """,
    # 2: the runtime face. Every table hangs off `sessions`, so deleting a session deletes
    # what the runtime stored for it; blobs are shared by content and swept by gc_unreachable,
    # and attachment rows outlive their session so the sweep can still reclaim the payloads.
    """
    CREATE TABLE runtime_heads (
        session_id TEXT COLLATE "C" PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
        schema_version INTEGER NOT NULL,
        head_revision BIGINT NOT NULL CHECK (head_revision > 0),
        config_json TEXT NOT NULL,
        agent_frames_json TEXT NOT NULL,
        current_agent_frame_id TEXT NOT NULL,
        checkpoint_ref TEXT NOT NULL,
        leaf_node_id TEXT,
        first_user_message TEXT,
        user_message_count BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE graph_nodes (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        node_id TEXT COLLATE "C" NOT NULL,
        parent_node_id TEXT COLLATE "C",
        position BIGINT NOT NULL,
        record_json TEXT NOT NULL,
        tombstoned BOOLEAN NOT NULL DEFAULT FALSE,
        PRIMARY KEY (session_id, node_id)
    );
    CREATE INDEX graph_nodes_order_idx ON graph_nodes(session_id, position);
    CREATE TABLE token_ledger (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        position BIGINT NOT NULL,
        entry_json TEXT NOT NULL,
        PRIMARY KEY (session_id, position)
    );
    CREATE TABLE turn_commits (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        turn_id TEXT COLLATE "C" NOT NULL,
        commit_hash TEXT NOT NULL,
        result_json TEXT NOT NULL,
        PRIMARY KEY (session_id, turn_id)
    );
    CREATE TABLE queued_work (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        batch_id TEXT COLLATE "C" NOT NULL,
        position BIGINT NOT NULL,
        boundary TEXT NOT NULL,
        items_json TEXT NOT NULL,
        enqueued_at_ms BIGINT NOT NULL,
        claim_id TEXT,
        claim_owner_id TEXT,
        lease_expires_at_ms BIGINT,
        PRIMARY KEY (session_id, batch_id)
    );
    CREATE UNIQUE INDEX queued_work_order_idx ON queued_work(session_id, position);
    CREATE INDEX queued_work_claim_idx ON queued_work(claim_id) WHERE claim_id IS NOT NULL;
    CREATE TABLE attachment_manifest (
        attachment_id TEXT COLLATE "C" PRIMARY KEY,
        session_id TEXT COLLATE "C" NOT NULL,
        canonical_uri TEXT NOT NULL,
        intent_at_ms BIGINT NOT NULL,
        committed_at_ms BIGINT
    );
    CREATE INDEX attachment_session_idx ON attachment_manifest(session_id);
    CREATE INDEX attachment_uncommitted_idx ON attachment_manifest(intent_at_ms)
        WHERE committed_at_ms IS NULL;
    CREATE TABLE blobs (
        blob_ref TEXT COLLATE "C" PRIMARY KEY,
        data BYTEA NOT NULL
    );
    CREATE TABLE session_meta (
        session_id TEXT COLLATE "C" PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
        meta_json TEXT NOT NULL
    );
    """,
    # 3: attachment entries looked up by payload URI: an intent may not name a payload of
    # another session, and a sweep keeps a file that any entry still names. A hash index,
    # because a URI has no length limit and a B-tree entry has one; lookups are by equality.
    """
    CREATE INDEX attachment_uri_idx ON attachment_manifest USING hash (canonical_uri);
    """,
    # 4: LangGraph checkpoints (`turnstore.integrations.langgraph`); see the SQLite schema.
    """
    CREATE TABLE lg_checkpoints (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        checkpoint_ns TEXT COLLATE "C" NOT NULL,
        checkpoint_id TEXT COLLATE "C" NOT NULL,
        parent_checkpoint_id TEXT COLLATE "C",
        run_id TEXT COLLATE "C",
        checkpoint_type TEXT NOT NULL,
        checkpoint BYTEA NOT NULL,
        metadata_type TEXT NOT NULL,
        metadata BYTEA NOT NULL,
        versions_json TEXT NOT NULL,
        delta_channels_json TEXT,
        PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id)
    );
    CREATE INDEX lg_checkpoints_run_idx ON lg_checkpoints(run_id) WHERE run_id IS NOT NULL;
    CREATE TABLE lg_blobs (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        checkpoint_ns TEXT COLLATE "C" NOT NULL,
        channel TEXT COLLATE "C" NOT NULL,
        version TEXT COLLATE "C" NOT NULL,
        value_type TEXT NOT NULL,
        value BYTEA,
        lineage BIGINT,
        length BIGINT CHECK (length IS NULL OR length >= 0),
        PRIMARY KEY (session_id, checkpoint_ns, channel, version),
        CHECK ((lineage IS NULL) = (length IS NULL))
    );
    CREATE TABLE lg_lineages (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        lineage BIGINT NOT NULL,
        base_lineage BIGINT,
        base_length BIGINT NOT NULL CHECK (base_length >= 0),
        depth INTEGER NOT NULL CHECK (depth >= 0),
        PRIMARY KEY (session_id, lineage)
    );
    CREATE TABLE lg_items (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        lineage BIGINT NOT NULL,
        position BIGINT NOT NULL CHECK (position >= 0),
        value_type TEXT NOT NULL,
        value BYTEA NOT NULL,
        PRIMARY KEY (session_id, lineage, position)
    );
    CREATE TABLE lg_writes (
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        checkpoint_ns TEXT COLLATE "C" NOT NULL,
        checkpoint_id TEXT COLLATE "C" NOT NULL,
        task_id TEXT COLLATE "C" NOT NULL,
        idx INTEGER NOT NULL,
        task_path TEXT COLLATE "C" NOT NULL,
        channel TEXT COLLATE "C" NOT NULL,
        value_type TEXT NOT NULL,
        value BYTEA,
        PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id, task_id, idx)
    );
    """,
    # 5: the step index holds streamed deltas only, the one kind its two statements read:
    # the other events of a model step (started, completed) no longer write an entry, and a
    # step completed in the save that streamed it writes none at all.
    """
    DROP INDEX event_journal_step_idx;
    CREATE INDEX event_journal_step_idx
        ON event_journal(session_id, model_step_id, event_kind, sequence, stream_phase,
                         recorded_at_ms, delta_bytes)
        WHERE event_kind IN ('agent_message_content_delta', 'agent_reasoning_content_delta');
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
