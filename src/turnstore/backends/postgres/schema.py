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
        items_json TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (session_id, sequence)
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
    CREATE INDEX sessions_owner_recent_idx
        ON sessions(owner_id, updated_at DESC, latest_sequence DESC, session_id DESC);
    CREATE INDEX sessions_parent_idx ON sessions(parent_session_id)
        WHERE parent_session_id IS NOT NULL;
    CREATE INDEX execution_journal_recent_idx
        ON execution_journal(started_at_ms DESC, session_id DESC, sequence DESC);
    CREATE INDEX event_journal_step_idx
        ON event_journal(session_id, model_step_id, event_kind)
        WHERE model_step_id IS NOT NULL;
    CREATE INDEX event_journal_token_count_idx
        ON event_journal(session_id, sequence) WHERE event_kind = 'token_count';
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
