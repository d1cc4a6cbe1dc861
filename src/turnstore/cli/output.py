"""Internal: rich rendering of catalogs, sessions, events and journals in 80 plain columns."""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from turnstore import (
    ExecutionRecord,
)
from turnstore.cli import common
from turnstore.cli.common import cut, escape_text
from turnstore.cli.crash import CrashResult
from turnstore.cli.describe import event_detail, event_kind, message_line, message_who
from turnstore.cli.views import SessionView, StoreView
from turnstore.events import (
    ModelStepCompletedEvent,
    TurnStartedEvent,
)
from turnstore.records import (
    FIGURES,
    ConversationPage,
    ExecutionStats,
    JournalEvent,
    SessionSummary,
    StreamMetrics,
)
from turnstore.records.kinds import kind_of

VIEWER_URL = "http://127.0.0.1:8765/"
"""Where `turnstore serve` answers by default."""


PIPED_WIDTH = 100_000
"""The width a table is laid out in off a terminal: wide enough that no cell is cut or
wrapped (a table is as wide as its widest row), so what is piped can be read back whole."""


def make_console(*, stderr: bool = False) -> Console:
    """A console for command output; off a terminal, rich drops colour and uses 80 columns
    for prose, while tables keep whole values (`show_table`)."""
    # Stored text may contain `[tags]` or `:names:`, and so does our own advice
    # (`pip install 'turnstore[serve]'`): nothing printed is markup, and emoji stay literal.
    return Console(highlight=False, emoji=False, markup=False, stderr=stderr)


def show_table(console: Console, table: Table) -> None:
    """Print a table: on a terminal, fitted to its width; off one, each value whole (to
    `common.PIPED_MOST` characters) and no line longer than its row needs."""
    if console.is_terminal:
        console.print(table)
        return
    # A console of its own: a print's `width` cannot exceed its console's.
    buffer = io.StringIO()
    Console(file=buffer, width=PIPED_WIDTH, highlight=False, emoji=False).print(table)
    lines = buffer.getvalue().splitlines()
    console.file.write("".join(f"{line.rstrip()}\n" for line in lines))


def render_more(console: Console, what: str, command: str) -> None:
    """Print that more rows exist, and the exact command that shows them."""
    console.print(what)
    console.print(Text(f"  {escape_text(command)}"), soft_wrap=True)


def render_removed(console: Console, verb: str, removed: Sequence[SessionSummary]) -> None:
    """Print every session a destructive command removed (or would), forks marked."""
    console.print(f"{verb} {len(removed)} session(s):")
    for summary in removed:
        parent = _parent(summary)
        suffix = f"  (fork of {parent})" if parent else ""
        console.print(Text(f"  {cut(summary.session_id, 120)}{suffix}"), soft_wrap=True)


def _table(*columns: str | Column) -> Table:
    return Table(*columns, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)


def _right(header: str) -> Column:
    return Column(header, justify="right")


def _name(header: str) -> Column:
    return Column(header, no_wrap=True)


def _key_values(rows: Sequence[tuple[str, str]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for key, value in rows:
        grid.add_row(key, Text(cut(value)))
    return grid


def heading(console: Console, title: str | Text) -> None:
    """Print a section heading."""
    console.print()
    text = Text(title) if isinstance(title, str) else title
    text.stylize("bold")
    console.rule(text, align="left")


def utc_seconds(seconds: int) -> str:
    """A catalog timestamp (Unix seconds) as UTC date and time."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def utc_clock(milliseconds: int) -> str:
    """A journal timestamp (Unix milliseconds) as a UTC time of day."""
    return datetime.fromtimestamp(milliseconds / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def _parent(summary: SessionSummary) -> str:
    if summary.parent_session_id is None:
        return ""
    return f"{cut(summary.parent_session_id, 60)}@{summary.parent_sequence}"


def render_catalog(console: Console, sessions: Sequence[SessionSummary]) -> None:
    """Print catalog entries, newest first, one row each."""
    if not sessions:
        console.print("No sessions.")
        return
    table = _table(
        _name("session"),
        _name("forked from"),
        _right("seq"),
        _right("turns"),
        _name("kind"),
        _name("owner"),
        "first message",
    )
    for summary in sessions:
        table.add_row(
            Text(cut(summary.session_id, 60)),
            Text(_parent(summary)),
            str(summary.sequence),
            _turns(summary),
            Text(cut(summary.kind or "-", 20)),
            Text(cut(summary.session_context.owner_id or "", 40)),
            # One line per session: the message is cut, never wrapped.
            Text(cut(summary.first_user_message or ""), no_wrap=True, overflow="ellipsis"),
        )
    show_table(console, table)


def render_summary(console: Console, summary: SessionSummary) -> None:
    """Print one session's catalog entry and execution stats as a key/value list."""
    context = summary.session_context
    rows = [
        ("session", summary.session_id),
        ("forked from", _parent(summary) or "-"),
        ("sequence", str(summary.sequence)),
        ("kind", summary.kind or "-"),
        ("owner", context.owner_id or "-"),
        ("workspace", context.workspace_label or context.workspace_id or "-"),
        ("origin", context.origin_label or "-"),
        ("in catalog", "yes" if summary.catalog_visible else "no (hidden)"),
        ("first message", summary.first_user_message or "-"),
        ("created", utc_seconds(summary.created_at)),
        ("updated", utc_seconds(summary.updated_at)),
    ]
    if summary.waiting:
        rows.append(("waiting in", ", ".join(summary.waiting)))
    show_table(console, _key_values(rows + stats_rows(summary.execution_stats, summary.measured)))


def _turns(summary: SessionSummary) -> str:
    """The catalog's turns cell: `-` where the kind records none, `waiting` when paused."""
    turns = str(summary.execution_stats.run_count) if "runs" in summary.measured else "-"
    return f"{turns} waiting" if summary.waiting else turns


UNRECORDED = "not recorded"
"""What a figure the session's framework does not record reads as, never a zero."""


def stats_rows(stats: ExecutionStats, measured: Iterable[str] = FIGURES) -> list[tuple[str, str]]:
    """A session's aggregate execution stats as (name, value) pairs; a figure not in
    `measured` reads as not recorded, and a part of one (`failed`) is left out."""
    kept = set(measured)
    usage = stats.usage
    turns = str(stats.run_count)
    if "failed_runs" in kept:
        turns += f" ({stats.failed_run_count} failed, {stats.aborted_run_count} aborted)"
    tools = str(stats.tool_calls)
    if "failed_tool_calls" in kept:
        tools += f" ({stats.failed_tool_calls} failed)"
    rows = [
        ("runs", "turns", turns),
        ("model_calls", "model calls", str(stats.model_calls)),
        ("tool_calls", "tool calls", tools),
        ("elapsed", "elapsed", f"{stats.elapsed_ms} ms"),
        (
            "tokens",
            "tokens",
            f"{usage.total_tokens} total: {usage.input_tokens} in"
            f" ({usage.cached_input_tokens} cached), {usage.output_tokens} out"
            f" ({usage.reasoning_output_tokens} reasoning)",
        ),
    ]
    return [(name, value if figure in kept else UNRECORDED) for figure, name, value in rows]


def render_stats(console: Console, stats: ExecutionStats) -> None:
    """Print a session's aggregate execution stats."""
    show_table(console, _key_values(stats_rows(stats)))


def render_events(console: Console, events: Sequence[JournalEvent]) -> None:
    """Print journal events in replay order, then the stream metrics they carry."""
    if not events:
        console.print("No events.")
        return
    first = events[0].recorded_at_ms
    table = _table(_right("seq"), _right("+ms"), _name("kind"), "detail")
    for event in events:
        msg = event.event.msg
        table.add_row(
            str(event.sequence),
            str(event.recorded_at_ms - first),
            Text(cut(event_kind(msg), 40)),
            Text(cut(event_detail(msg))),
        )
    show_table(console, table)
    if events[-1].sequence - events[0].sequence + 1 > len(events):
        console.print(
            "Missing seq numbers were compacted: the deltas of completed model steps"
            " and superseded token counts."
        )
    render_stream_metrics(console, events)


def _metrics_row(event: JournalEvent, metrics: StreamMetrics) -> tuple[str, ...]:
    msg = event.event.msg
    started = msg.started_at_ms if isinstance(msg, ModelStepCompletedEvent) else None
    step = msg.model_step_id if isinstance(msg, ModelStepCompletedEvent) else str(event.sequence)
    origin = metrics.first_delta_at_ms if started is None else started
    return (
        cut(step, 60),
        cut(metrics.phase, 40),
        str(metrics.chunk_count),
        str(metrics.utf8_bytes),
        f"+{metrics.first_delta_at_ms - origin}ms",
        f"+{metrics.last_delta_at_ms - origin}ms",
        f"{metrics.longest_gap_ms}ms",
    )


def render_stream_metrics(console: Console, events: Sequence[JournalEvent]) -> None:
    """Print the stream metrics of completed model steps (delta times after step start)."""
    rows = [_metrics_row(event, metrics) for event in events for metrics in event.stream_metrics]
    if not rows:
        return
    headers = ("chunks", "bytes", "first", "last", "max gap")
    table = _table(_name("model step"), _name("phase"), *map(_right, headers))
    for row in rows:
        table.add_row(*row)
    console.print()
    console.print("Stream metrics (first/last delta: time after the model step started):")
    show_table(console, table)


def render_conversation(console: Console, page: ConversationPage) -> None:
    """Print a page of a conversation oldest first, each message at its place, with extras.

    A transcript message's place is `sequence.item` (1-based), an item's its index.
    """
    point = page.langgraph
    if point is not None:
        nexts = ", ".join(point.next) or "nothing (the run is done)"
        console.print(
            Text(
                f"LangGraph checkpoint {cut(point.checkpoint_id, 60)}, step {point.step},"
                f" source {point.source}; next: {cut(nexts, 200)}"
            )
        )
    if not page.messages:
        console.print("No messages.")
        return
    table = _table(_right("at"), _name("who"), "text")
    for message in page.messages:
        at = str(message.index)
        if message.sequence is not None:
            at = f"{message.sequence}.{message.index + 1}"
        table.add_row(at, Text(cut(message_who(message), 40)), Text(cut(message_line(message))))
    show_table(console, table)
    if page.next_before is not None and page.total is not None:
        console.print(f"{page.next_before} older of {page.total} items not shown.")


def _count_failed(total: int, failed: int) -> str:
    return f"{total} ({failed} failed)" if failed else str(total)


def render_executions(console: Console, records: Sequence[ExecutionRecord]) -> None:
    """Print finished-turn records, one row each."""
    if not records:
        console.print("No finished turns.")
        return
    table = _table(
        _name("turn"),
        _name("outcome"),
        _name("started (UTC)"),
        *map(_right, ("elapsed", "model", "tools", "tokens")),
    )
    for record in records:
        table.add_row(
            Text(cut(record.turn_id, 60)),
            cut(record.outcome, 40),
            utc_clock(record.started_at_ms),
            f"{record.elapsed_ms} ms",
            str(record.model_calls),
            _count_failed(record.tool_calls, record.failed_tool_calls),
            str(record.usage.total_tokens),
        )
    show_table(console, table)


def render_session(console: Console, view: SessionView, older: str | None = None) -> None:
    """Print `sessions show`: summary, transcript and events, then how to page older ones."""
    heading(console, Text(f"Session {cut(view.summary.session_id, 60)}"))
    render_summary(console, view.summary)
    kind = kind_of(view.summary.kind).name
    heading(console, f"Conversation ({kind}; newest, oldest first)")
    render_conversation(console, view.conversation)
    title = "Recent events" if view.before is None else f"Events before seq {view.before}"
    heading(console, title)
    render_events(console, view.events)
    if older is not None:
        render_more(console, "Older events:", older)


def _turn_title(events: Sequence[JournalEvent]) -> str:
    started = events[0].event.msg
    return cut(started.turn_id, 60) if isinstance(started, TurnStartedEvent) else "a turn"


def command_name() -> str:
    """How to call this command again: `turnstore` when that is on PATH, else its full path."""
    return common.command_name()


def render_demo(
    console: Console, view: StoreView, path: Path, crash: CrashResult | None = None
) -> None:
    """Print what the demo left in the store, section by section."""
    session_id = view.summary.session_id
    heading(console, "Session catalog (newest first)")
    render_catalog(console, view.catalog)
    for number, events in enumerate(view.turns, start=1):
        last = " (the last turn)" if number == len(view.turns) else ""
        heading(console, f"Events of {_turn_title(events)}{last}")
        render_events(console, events)
    heading(console, f"Transcript of {session_id}")
    render_conversation(console, view.conversation)
    heading(console, f"Execution stats of {session_id}")
    render_stats(console, view.summary.execution_stats)
    heading(console, f"Execution journal of {session_id} (oldest first)")
    render_executions(console, view.executions)
    if crash is not None:
        render_crash(console, crash)
    heading(console, "Database")
    console.print(Text(escape_text(str(path))), soft_wrap=True)
    console.print("Inspect it with:")
    shown = [("sessions list",), ("sessions show", session_id)]
    if crash is not None:
        shown.append(("sessions show", crash.checkpoint.session_id))
    for command, *args in shown:
        line = common.again(command, str(path), *args)
        console.print(Text(f"  {escape_text(line)}"), soft_wrap=True)
    console.print(f"Or browse it in the web viewer{_serve_extra()} at {VIEWER_URL} with:")
    console.print(Text(f"  {escape_text(common.again('serve', str(path)))}"), soft_wrap=True)


def _serve_extra() -> str:
    """What to install before `turnstore serve` runs, if anything."""
    if all(importlib.util.find_spec(name) for name in ("uvicorn", "starlette")):
        return ""
    return " (pip install 'turnstore[serve]' first)"


def render_crash(console: Console, crash: CrashResult) -> None:
    """Print the crash section: what the killed worker did, and what reloading found."""
    checkpoint = crash.checkpoint
    heading(console, f"A worker killed mid-turn: {checkpoint.session_id}")
    console.print(
        f"A worker process (pid {crash.pid}) finished turn-1 at sequence"
        f" {crash.finished_sequence}, started turn-2 at sequence {crash.last_sequence},"
        f" streamed {crash.streamed} deltas of its answer and was killed with SIGKILL."
    )
    verdict = "exactly its last commit" if crash.exact else "NOT its last commit"
    console.print(f"Reloaded: sequence {checkpoint.sequence}, {verdict}.")
    active, step = checkpoint.active_execution, checkpoint.active_model_step
    rows = [
        ("turn in flight", f"{active.turn_id} (to resume or abort)" if active else "none"),
        ("model step", f"{step.model_step_id}, interrupted" if step else "none"),
        ("transcript", f"{crash.transcript_items} items: turn-1's, none of the lost answer"),
        ("journal", f"{crash.journal_deltas} streamed deltas, kept as they were appended"),
    ]
    show_table(console, _key_values(rows))


def render_key_values(console: Console, rows: Sequence[tuple[str, str]]) -> None:
    """Print a report as aligned name/value rows, values escaped and cut."""
    show_table(console, _key_values(rows))


def render_ids(console: Console, title: str, ids: Sequence[str]) -> None:
    """Print a title then every id on its own line, escaped: what a command removed."""
    console.print(title)
    for found in ids:
        console.print(Text(f"  {cut(found, 120)}"), soft_wrap=True)


def size(count: int) -> str:
    """A byte count for people: `1.5 MiB (1572864 bytes)`."""
    value, unit = float(count), "bytes"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{count} bytes" if unit == "bytes" else f"{value:.1f} {unit} ({count} bytes)"
