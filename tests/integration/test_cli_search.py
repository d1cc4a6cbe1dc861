"""`turnstore search` on both backends: kinds, queries that start with `-`, snippets, JSON."""

from __future__ import annotations

from test_cli import last_line, run, run_printed, run_process

import turnstore
from turnstore.records.kinds import kinds

ITEMS = [
    {"role": "user", "content": "first line\nsecond beacon line\tend"},
    {"role": "assistant", "content": "run it with -v for a verbose beacon"},
]


def seed(url: str) -> str:
    """The store at `url`, holding `ITEMS` in one session of items; return the URL."""
    with turnstore.open_blocking(url) as store:
        store.append_context("s", ITEMS, "ann")
    return url


def test_an_unknown_kind_names_the_known_kinds(store_url: str) -> None:
    """A kind no integration writes is no error, but the empty page names the kinds."""
    seed(store_url)
    result = run("search", store_url, "beacon", "--kind", "ADK")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "No item matches. No integration writes sessions of kind 'ADK'." in text
    assert "Did you mean adk?" in text
    assert ", ".join(kind.name for kind in kinds()) in text
    known = run("search", store_url, "beacon", "--kind", "adk")
    assert known.stdout.strip() == "No item matches."


def test_a_query_that_starts_with_one_dash_is_the_query(store_url: str) -> None:
    """`-v` is a query wherever it stands; `--v…` needs `--`, and the error says so."""
    seed(store_url)
    for args, env in (
        ([store_url, "-v", "--json"], {}),
        (["-v", store_url, "--json"], {}),
        (["-v", "--json"], {"TURNSTORE_URL": store_url}),
    ):
        result = run("search", *args, env=env)
        assert result.exit_code == 0, result.output
        assert [line.get("item") for line in result.json_lines()] == [1, None]
    refused = run("search", store_url, "--verbose beacon")
    assert refused.exit_code == 2
    assert "a query that starts with -- goes after --" in refused.stderr
    assert "URL -- '--verbose beacon'" in refused.stderr
    after = run("search", store_url, "--json", "--", "--verbose beacon")
    assert [line.get("item") for line in after.json_lines()] == [1, None]
    # A misspelt option is still one, with click's guess.
    misspelt = run("search", store_url, "beacon", "--ownr", "ann")
    assert misspelt.exit_code == 2
    assert "'--owner'" in misspelt.stderr
    assert "goes after --" not in misspelt.stderr


def test_the_next_page_of_a_dashed_query_runs_as_printed(store_url: str) -> None:
    """The next-page command puts a query that starts with `-` behind `--`."""
    with turnstore.open_blocking(store_url) as store:
        store.append_context("s", [{"role": "user", "content": f"-v run {n}"} for n in range(3)])
    first = run_process("search", store_url, "-v", "--limit", 2)
    assert first.exit_code == 0, first.output
    command = last_line(first)
    assert command.endswith("-- -v"), command
    second = run_printed(command)
    assert second.exit_code == 0, second.output
    assert "-v run 0" in second.stdout
    assert "More hits exist" not in second.stdout


def test_a_snippet_shows_line_breaks_and_tabs_as_spaces(store_url: str) -> None:
    """The table shows a snippet on one line of text; JSON keeps the text as it is."""
    seed(store_url)
    table = run("search", store_url, "second")
    assert table.exit_code == 0, table.output
    assert "\\n" not in table.stdout
    assert "\\t" not in table.stdout
    assert "first line second beacon line end" in " ".join(table.stdout.replace("│", "").split())
    (hit, end) = run("search", store_url, "second", "--json").json_lines()
    assert hit["snippet"] == "first line\nsecond beacon line\tend"
    assert end == {"next": None}


def test_json_always_ends_with_the_next_cursor(store_url: str) -> None:
    """`--json` ends every page with `{"next": ...}`, null on the last, as its help says."""
    seed(store_url)
    first = run("search", store_url, "beacon", "--limit", 1, "--json").json_lines()
    assert len(first) == 2
    assert isinstance(first[-1]["next"], str)
    rest = run("search", store_url, "beacon", "--after", first[-1]["next"], "--json")
    assert rest.json_lines()[-1] == {"next": None}
    empty = run("search", store_url, "nowhere", "--json").json_lines()
    assert empty == [{"next": None}]
    help_text = " ".join(run("search", "--help").stdout.split())
    assert 'always a last line {"next": CURSOR}, CURSOR null on the last page' in help_text
