"""The schema of both dialects, written once as an ordered list of migrations.

A list index + 1 is a schema version. Each migration is a line saying what its version adds
(what `migrate` reports) and SQL with a few words in braces where SQLite and PostgreSQL
differ; each backend's `schema.py` fills them in with its `DdlWords`. The one list keeps a
version's summary beside its SQL, so neither can be added without the other.
JSON is stored as TEXT on both, not JSONB: JSONB reorders object keys, and a checkpoint must
load exactly as it was saved (the context-append rule compares the encoded bytes of items).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: what it adds, and the SQL that adds it."""

    summary: str
    """One line, the same on every backend, as `migrate` reports the step."""
    ddl: str
    """The statements, with the words in braces that `DdlWords` fills in per dialect."""


@dataclass(frozen=True, slots=True)
class DdlWords:
    """The words in which one dialect's DDL differs from the other's."""

    id: str
    """An id or key: PostgreSQL's "C" collation orders ties byte-wise, exactly as SQLite does."""
    bigint: str
    """A count, sequence or time: SQLite's INTEGER is already 64 bits."""
    blob: str
    """Bytes as stored."""
    flag: str
    """A yes-or-no column."""
    false: str
    """A flag's default of no."""
    checks_flags: bool
    """Whether a `flag` column needs a CHECK that it holds 0 or 1 (SQLite has no booleans)."""
    now: str
    """The default of a creation time, where the dialect's `now` fits in a DEFAULT."""
    no_rowid: str
    """How a table of small rows keyed by text keeps each row in its key's b-tree only."""
    hash: str
    """The index method for a lookup by equality of a value of any length."""
    serial_key: str
    """A primary key numbered by the database in the order rows are inserted."""
    text_vector: str
    """Columns a table of searchable `body` text adds for its text index, if any (schema 7)."""
    text_index: str
    """The text index over `search_items.body` and whatever keeps it in step (schema 7)."""
    clear_text_index: str
    """Empties `search_items` and its text index at once (not row by row), as of schema 8."""
    words_only: str
    """Turns schema 8's text index into one that keeps no copy of the words: the index built
    from `search_items.body` stays, `body` goes."""
    memory_text: str
    """Schema 11's text index of memory items, and what each item needs for it."""
    memory_pending: str
    """Schema 12's mark of the memory items whose words wait for the indexer, and what a
    database that indexes them later needs (nothing, where a put indexes them)."""


class _FlagChecks:
    """`{flag_check[column]}`: the CHECK a flag column needs, if any."""

    def __init__(self, needed: bool) -> None:
        self._needed = needed

    def __getitem__(self, column: str) -> str:
        return f" CHECK ({column} IN (0, 1))" if self._needed else ""


def render(words: DdlWords) -> tuple[str, ...]:
    """The migrations' SQL in one dialect's words, in version order."""
    fills = {**asdict(words), "flag_check": _FlagChecks(words.checks_flags)}
    return tuple(migration.ddl.format_map(fills) for migration in MIGRATIONS)


MIGRATIONS: tuple[Migration, ...] = (
    # 1: the checkpoint store. The checkpoint row keeps the state without its context; the
    # context lives in append-only chunks so a save writes only what was appended. Tables of
    # kilobyte rows are SQLite rowid tables: a WITHOUT ROWID b-tree keeps only about a quarter
    # page of a row in place and spills the rest to half-empty overflow pages.
    Migration(
        "the checkpoint store: sessions, context chunks, transcript, execution and event journals",
        """
    CREATE TABLE middleware_state (
        scope {id} NOT NULL,
        key {id} NOT NULL,
        value_json TEXT NOT NULL,
        PRIMARY KEY (scope, key)
    );
    CREATE TABLE sessions (
        session_id {id} PRIMARY KEY,
        parent_session_id {id} REFERENCES sessions(session_id),
        parent_sequence {bigint} CHECK (parent_sequence IS NULL OR parent_sequence >= 0),
        latest_sequence {bigint} NOT NULL CHECK (latest_sequence >= 0),
        latest_event_sequence {bigint} NOT NULL DEFAULT 0 CHECK (latest_event_sequence >= 0),
        checkpoint_state_json TEXT NOT NULL,
        context_epoch {bigint} NOT NULL CHECK (context_epoch >= 0),
        context_length {bigint} NOT NULL CHECK (context_length >= 0),
        context_tail {blob},
        session_context_json TEXT NOT NULL,
        owner_id {id},
        execution_stats_json TEXT NOT NULL,
        catalog_visible {flag} NOT NULL{flag_check[catalog_visible]},
        first_user_message TEXT,
        created_at {bigint} NOT NULL{now},
        updated_at {bigint} NOT NULL{now},
        CHECK ((parent_session_id IS NULL) = (parent_sequence IS NULL))
    );
    CREATE TABLE context_chunks (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        start {bigint} NOT NULL CHECK (start >= 0),
        items_json TEXT NOT NULL,
        PRIMARY KEY (session_id, start)
    );
    CREATE TABLE transcript_delta (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        sequence {bigint} NOT NULL CHECK (sequence >= 0),
        -- A batch equal to the context items its save appended is not stored twice: it names
        -- that context chunk instead, and is copied back here before a rewrite drops the chunk.
        items_json TEXT,
        context_start {bigint},
        created_at {bigint} NOT NULL{now},
        PRIMARY KEY (session_id, sequence),
        CHECK ((items_json IS NULL) <> (context_start IS NULL))
    );
    CREATE TABLE execution_journal (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        sequence {bigint} NOT NULL CHECK (sequence >= 0),
        record_json TEXT NOT NULL,
        started_at_ms {bigint} NOT NULL CHECK (started_at_ms >= 0),
        PRIMARY KEY (session_id, sequence)
    );
    CREATE TABLE event_journal (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        sequence {bigint} NOT NULL CHECK (sequence > 0),
        recorded_at_ms {bigint} NOT NULL CHECK (recorded_at_ms >= 0),
        event_kind TEXT NOT NULL,
        model_step_id TEXT,
        stream_phase TEXT,
        delta_bytes {bigint} CHECK (delta_bytes IS NULL OR delta_bytes >= 0),
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
    ),
    # 2: the runtime face. Every table hangs off `sessions`, so deleting a session deletes
    # what the runtime stored for it; blobs are shared by content and swept by gc_unreachable,
    # and attachment rows outlive their session so the sweep can still reclaim the payloads.
    Migration(
        "the runtime face: heads, graph nodes, turn commits, queued work, attachments, blobs",
        """
    CREATE TABLE runtime_heads (
        session_id {id} PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
        schema_version INTEGER NOT NULL,
        head_revision {bigint} NOT NULL CHECK (head_revision > 0),
        config_json TEXT NOT NULL,
        agent_frames_json TEXT NOT NULL,
        current_agent_frame_id TEXT NOT NULL,
        checkpoint_ref TEXT NOT NULL,
        leaf_node_id TEXT,
        first_user_message TEXT,
        user_message_count {bigint} NOT NULL DEFAULT 0
    );
    CREATE TABLE graph_nodes (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        node_id {id} NOT NULL,
        parent_node_id {id},
        position {bigint} NOT NULL,
        record_json TEXT NOT NULL,
        tombstoned {flag} NOT NULL DEFAULT {false}{flag_check[tombstoned]},
        PRIMARY KEY (session_id, node_id)
    );
    CREATE INDEX graph_nodes_order_idx ON graph_nodes(session_id, position);
    CREATE TABLE token_ledger (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        position {bigint} NOT NULL,
        entry_json TEXT NOT NULL,
        PRIMARY KEY (session_id, position)
    ){no_rowid};
    CREATE TABLE turn_commits (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        turn_id {id} NOT NULL,
        commit_hash TEXT NOT NULL,
        result_json TEXT NOT NULL,
        PRIMARY KEY (session_id, turn_id)
    );
    CREATE TABLE queued_work (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        batch_id {id} NOT NULL,
        position {bigint} NOT NULL,
        boundary TEXT NOT NULL,
        items_json TEXT NOT NULL,
        enqueued_at_ms {bigint} NOT NULL,
        claim_id TEXT,
        claim_owner_id TEXT,
        lease_expires_at_ms {bigint},
        PRIMARY KEY (session_id, batch_id)
    );
    CREATE UNIQUE INDEX queued_work_order_idx ON queued_work(session_id, position);
    CREATE INDEX queued_work_claim_idx ON queued_work(claim_id) WHERE claim_id IS NOT NULL;
    CREATE TABLE attachment_manifest (
        attachment_id {id} PRIMARY KEY,
        session_id {id} NOT NULL,
        canonical_uri TEXT NOT NULL,
        intent_at_ms {bigint} NOT NULL,
        committed_at_ms {bigint}
    );
    CREATE INDEX attachment_session_idx ON attachment_manifest(session_id);
    CREATE INDEX attachment_uncommitted_idx ON attachment_manifest(intent_at_ms)
        WHERE committed_at_ms IS NULL;
    CREATE TABLE blobs (
        blob_ref {id} PRIMARY KEY,
        data {blob} NOT NULL
    );
    CREATE TABLE session_meta (
        session_id {id} PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
        meta_json TEXT NOT NULL
    );
    """,
    ),
    # 3: attachment entries looked up by payload URI: an intent may not name a payload of
    # another session, and a sweep keeps a file that any entry still names. A URI has no
    # length limit and a PostgreSQL B-tree entry has one, so there it is a hash index.
    Migration(
        "attachment entries looked up by payload URI",
        """
    CREATE INDEX attachment_uri_idx ON attachment_manifest{hash}(canonical_uri);
    """,
    ),
    # 4: LangGraph checkpoints (`turnstore.integrations.langgraph`), one session per thread.
    # A channel value is a row of `lg_blobs` per version; a list value names a prefix of a
    # lineage of `lg_items` instead, so a version that appends to a list writes only the new
    # items. A lineage may start as a prefix of another (a branch from an older checkpoint).
    # Checkpoints, versions and writes are rows of a few hundred bytes (values are compressed)
    # keyed by text: WITHOUT ROWID keeps each in its key's b-tree instead of twice.
    Migration(
        "LangGraph checkpoints, channel values, list lineages and pending writes",
        """
    CREATE TABLE lg_checkpoints (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        checkpoint_ns {id} NOT NULL,
        checkpoint_id {id} NOT NULL,
        parent_checkpoint_id {id},
        run_id {id},
        checkpoint_type TEXT NOT NULL,
        checkpoint {blob} NOT NULL,
        metadata_type TEXT NOT NULL,
        metadata {blob} NOT NULL,
        versions_json TEXT NOT NULL,
        delta_channels_json TEXT,
        PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id)
    ){no_rowid};
    CREATE INDEX lg_checkpoints_run_idx ON lg_checkpoints(run_id) WHERE run_id IS NOT NULL;
    CREATE TABLE lg_blobs (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        checkpoint_ns {id} NOT NULL,
        channel {id} NOT NULL,
        version {id} NOT NULL,
        value_type TEXT NOT NULL,
        value {blob},
        lineage {bigint},
        length {bigint} CHECK (length IS NULL OR length >= 0),
        PRIMARY KEY (session_id, checkpoint_ns, channel, version),
        CHECK ((lineage IS NULL) = (length IS NULL))
    ){no_rowid};
    CREATE TABLE lg_lineages (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        lineage {bigint} NOT NULL,
        base_lineage {bigint},
        base_length {bigint} NOT NULL CHECK (base_length >= 0),
        depth INTEGER NOT NULL CHECK (depth >= 0),
        PRIMARY KEY (session_id, lineage)
    );
    CREATE TABLE lg_items (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        lineage {bigint} NOT NULL,
        position {bigint} NOT NULL CHECK (position >= 0),
        value_type TEXT NOT NULL,
        value {blob} NOT NULL,
        PRIMARY KEY (session_id, lineage, position)
    );
    CREATE TABLE lg_writes (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        checkpoint_ns {id} NOT NULL,
        checkpoint_id {id} NOT NULL,
        task_id {id} NOT NULL,
        idx INTEGER NOT NULL,
        task_path {id} NOT NULL,
        channel {id} NOT NULL,
        value_type TEXT NOT NULL,
        value {blob},
        PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id, task_id, idx)
    ){no_rowid};
    """,
    ),
    # 5: the step index holds streamed deltas only, the one kind its two statements read:
    # the other events of a model step (started, completed) no longer write an entry, and a
    # step completed in the save that streamed it writes none at all.
    Migration(
        "the model-step index narrowed to streamed deltas, so other events write no entry in it",
        """
    DROP INDEX event_journal_step_idx;
    CREATE INDEX event_journal_step_idx
        ON event_journal(session_id, model_step_id, event_kind, sequence, stream_phase,
                         recorded_at_ms, delta_bytes)
        WHERE event_kind IN ('agent_message_content_delta', 'agent_reasoning_content_delta');
    """,
    ),
    # 6: a save's events that no later save deletes are one row: a JSON array of
    # [sequence, recorded_at_ms, event, stream metrics], keyed by its first sequence. Deltas
    # of a step still streaming and token counts stay one row each in event_journal, where
    # the step's completion or the next token count deletes them. Rows written before stay.
    Migration(
        "event batches: a save's events that no later save deletes are stored as one row",
        """
    CREATE TABLE event_batches (
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        first_sequence {bigint} NOT NULL CHECK (first_sequence > 0),
        last_sequence {bigint} NOT NULL CHECK (last_sequence >= first_sequence),
        event_count {bigint} NOT NULL CHECK (event_count > 0),
        events_json TEXT NOT NULL,
        PRIMARY KEY (session_id, first_sequence)
    );
    """,
    ),
    # 7: the conversation search. `sessions.kind` names what wrote a session (NULL: written
    # before this schema, named by the reindex). `search_items` holds each searchable item's
    # text: a transcript item (sequence, index in its batch) or a context item (its index in
    # the context, removed with it in the commit that removes it). Items are added off the
    # save path, by an indexer that finds sessions changed since `search_marks` says it last
    # looked. The index is derived: a store that held sessions before this schema is
    # searchable once `reindex` has built it (`search_index_state.built`).
    Migration(
        "conversation search: each session's kind, and a text index of its items (reindex to fill)",
        """
    ALTER TABLE sessions ADD COLUMN kind TEXT;
    CREATE TABLE search_items (
        item_id {serial_key},
        session_id {id} NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        sequence {bigint},
        item {bigint} NOT NULL CHECK (item >= 0),
        in_context {flag} NOT NULL{flag_check[in_context]},
        written_at_ms {bigint} NOT NULL,
        body TEXT NOT NULL{text_vector},
        CHECK (in_context = (sequence IS NULL))
    );
    CREATE INDEX search_items_session_idx ON search_items(session_id, in_context, item);
    {text_index}
    CREATE TABLE search_marks (
        session_id {id} PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
        indexed_sequence {bigint} NOT NULL,
        indexed_length {bigint} NOT NULL
    );
    CREATE TABLE search_index_state (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        built {flag} NOT NULL{flag_check[built]},
        resume_after {id},
        caught_up_to {bigint} NOT NULL
    );
    INSERT INTO search_index_state (singleton, built, caught_up_to)
        SELECT 1, NOT EXISTS (SELECT 1 FROM sessions), 0;
    """,
    ),
    # 8: framework sessions' figures, and the index's own words. A framework's session keeps
    # its figures inside its items (token counts, timestamps, tool calls), which the indexer
    # reads anyway: what it derives is kept on the session row, apart from what saves count,
    # so a rebuild derives it afresh. The index now holds an item's words as
    # `rules/search_text.py` reads them (case folded, Latin diacritics dropped, CJK runs as
    # pairs of characters) for both backends alike, not its text, so it is rebuilt: emptied
    # here, and built again by `reindex` (which `turnstore migrate` runs, with progress),
    # which derives the figures too.
    Migration(
        "framework sessions' figures and LangGraph threads' waiting nodes; the search index"
        " in words read alike on both backends, CJK included (reindex to fill)",
        """
    ALTER TABLE sessions ADD COLUMN figures_json TEXT;
    {clear_text_index}
    DELETE FROM search_marks;
    UPDATE search_index_state SET built = NOT EXISTS (SELECT 1 FROM sessions),
        resume_after = NULL, caught_up_to = 0;
    """,
    ),
    # 9: the search index keeps no second copy of the words. `search_items` keeps where each
    # item is, and the text index only what finds and ranks it: SQLite's FTS5 table without
    # content (a delete hands it the words again, read from the item itself), PostgreSQL's
    # tsvector computed by the insert from the words it is given. Snippets are cut from the
    # items as the store keeps them. The index is kept: it is filled from `body` before
    # `body` is dropped, so no reindex is needed.
    Migration(
        "the search index without a second copy of the text (the index itself is kept)",
        """
    {words_only}
    """,
    ),
    # 10: long-term memory. An item is a JSON object under (namespace, key), a namespace its
    # labels joined by "." (which no label holds), so the items under a prefix are one range
    # of the key. Kilobyte values: a rowid table. `memory_vectors` keeps an item's embeddings,
    # unit float32 vectors as bytes, one per field they were taken from. Times are the
    # database's, in Unix milliseconds; `expires_at_ms` is NULL for an item that never expires.
    Migration(
        "long-term memory: items by namespace and key, with their times to live and vectors",
        """
    CREATE TABLE memory_items (
        namespace {id} NOT NULL,
        item_key {id} NOT NULL,
        owner_id {id},
        value_json TEXT NOT NULL,
        created_at_ms {bigint} NOT NULL,
        updated_at_ms {bigint} NOT NULL,
        ttl_ms {bigint} CHECK (ttl_ms > 0),
        expires_at_ms {bigint},
        CHECK ((ttl_ms IS NULL) = (expires_at_ms IS NULL)),
        PRIMARY KEY (namespace, item_key)
    );
    CREATE INDEX memory_items_expiry_idx ON memory_items(expires_at_ms)
        WHERE expires_at_ms IS NOT NULL;
    CREATE INDEX memory_items_owner_idx ON memory_items(owner_id) WHERE owner_id IS NOT NULL;
    CREATE TABLE memory_vectors (
        namespace {id} NOT NULL,
        item_key {id} NOT NULL,
        field {id} NOT NULL,
        vector {blob} NOT NULL,
        PRIMARY KEY (namespace, item_key, field),
        FOREIGN KEY (namespace, item_key) REFERENCES memory_items(namespace, item_key)
            ON DELETE CASCADE
    );
    """,
    ),
    # 11: memory items searched by their words, as sessions are (`rules/search_text.py`),
    # in an index of each database's own: SQLite's FTS5 without content, whose rows are the
    # items' row ids (so `memory_items` is rebuilt around an id no VACUUM renumbers), and
    # PostgreSQL's tsvector column under a GIN index. Items written before it are indexed
    # when they are written again.
    Migration(
        "long-term memory searched by its words (items written before: once written again)",
        """
    {memory_text}
    """,
    ),
    # 12: on SQLite, memory items searched by their words are indexed off the put path, as
    # sessions are: a put marks the item pending (a partial index finds the pending ones),
    # and the search indexer, or a search by words first, indexes them in batches. Nothing
    # on PostgreSQL, whose put writes the words itself.
    Migration(
        "long-term memory's words indexed after the put (SQLite)",
        """
    {memory_pending}
    """,
    ),
)
"""Every version's migration in order: `MIGRATIONS[n - 1]` adds version `n`."""
