"""`turnstore serve`'s memory endpoints on both backends: namespaces, items, search, scope."""

from __future__ import annotations

import json
from typing import Any

from turnstore import BlockingStore
from turnstore.records.memory import MemoryCall, MemoryFindRequest, MemoryPut


def put(store: BlockingStore, namespace: tuple[str, ...], key: str, value: Any, owner: str) -> None:
    """One item, searched by its words."""
    write = MemoryPut(namespace, key, json.dumps(value), None, owner, text=True)
    store.memory.run(MemoryCall(writes=(write,)))


def seed(store: BlockingStore) -> None:
    """Alice's notes and preferences, Bob's preferences; all mention the lighthouse."""
    for n in range(3):
        put(store, ("alice", "notes"), f"n{n}", {"text": f"note {n} on the lighthouse"}, "alice")
    put(store, ("alice", "prefs"), "tone", {"tone": "short", "nan": None}, "alice")
    put(store, ("bob", "prefs"), "lang", {"text": "French near the lighthouse"}, "bob")


def test_namespaces_items_and_search_answer_as_the_library_does(
    serve: Any, writer: BlockingStore
) -> None:
    """Each endpoint's body is the library's answer; pages chain by next_after/next_offset."""
    seed(writer)
    server = serve()
    body = server.get("/api/memory/namespaces").json()
    assert [(n["namespace"], n["items"]) for n in body["namespaces"]] == [
        (["alice", "notes"], 3),
        (["alice", "prefs"], 1),
        (["bob", "prefs"], 1),
    ]
    assert body["next_after"] is None
    first = server.get("/api/memory/namespaces", params={"limit": 2}).json()
    assert first["next_after"] == "alice.prefs"
    rest = server.get("/api/memory/namespaces", params={"after": first["next_after"]}).json()
    assert [n["namespace"] for n in rest["namespaces"]] == [["bob", "prefs"]]

    page = server.get("/api/memory/items", params={"namespace": "alice", "limit": 3}).json()
    assert len(page["items"]) == 3
    assert page["next_offset"] == 3
    more = server.get("/api/memory/items", params={"namespace": "alice", "offset": 3}).json()
    assert more["next_offset"] is None
    every = {(tuple(i["namespace"]), i["key"]) for i in page["items"] + more["items"]}
    assert len(every) == 4
    tone = next(i for i in more["items"] + page["items"] if i["key"] == "tone")
    assert tone["value"] == {"tone": "short", "nan": None}
    assert tone["owner_id"] == "alice"

    hits = server.get("/api/memory/search", params={"q": "lighthouse", "limit": 10}).json()
    expected = writer.memory.find(MemoryFindRequest("lighthouse", limit=10))
    assert [(tuple(h["namespace"]), h["key"]) for h in hits["hits"]] == [
        (hit.namespace, hit.key) for hit in expected.hits
    ]
    (french,) = server.get("/api/memory/search", params={"q": "french"}).json()["hits"]
    start, end = french["marks"][0]
    assert french["snippet"][start:end] == "French"


def test_an_owner_scope_holds_on_every_memory_endpoint(serve: Any, writer: BlockingStore) -> None:
    """`--owner alice` shows alice's items only, whatever `owner` or namespace is asked."""
    seed(writer)
    put(writer, ("bob", "prefs"), "shared", {"text": "alice's lighthouse"}, "bob")
    server = serve("--owner", "alice")
    spaces = server.get("/api/memory/namespaces").json()["namespaces"]
    assert [n["namespace"] for n in spaces] == [["alice", "notes"], ["alice", "prefs"]]
    assert server.get("/api/memory/namespaces", params={"owner": "bob"}).json()["namespaces"] == []
    assert server.get("/api/memory/items", params={"namespace": "bob"}).json()["items"] == []
    hits = server.get("/api/memory/search", params={"q": "lighthouse"}).json()["hits"]
    assert {h["namespace"][0] for h in hits} == {"alice"}
    asked = server.get("/api/memory/search", params={"q": "lighthouse", "owner": "bob"})
    assert asked.json()["hits"] == []


def test_bad_memory_parameters_are_400_with_a_typed_error(
    serve: Any, writer: BlockingStore
) -> None:
    """A missing or empty-labelled namespace, a bad limit or offset, an empty query: 400."""
    seed(writer)
    server = serve()
    for path, query in (
        ("/api/memory/items", {}),
        ("/api/memory/items", {"namespace": "a..b"}),
        ("/api/memory/items", {"namespace": "alice", "offset": "-1"}),
        ("/api/memory/namespaces", {"limit": "0"}),
        ("/api/memory/namespaces", {"prefix": ".a"}),
        ("/api/memory/search", {"q": ""}),
        ("/api/memory/search", {"q": "x", "limit": "101"}),
    ):
        answer = server.get(path, params=query)
        assert answer.status_code == 400, (path, query, answer.text)
        assert answer.json()["type"] == "InvalidInput", (path, query)


def test_a_value_json_cannot_carry_is_shown_as_json_can(serve: Any, writer: BlockingStore) -> None:
    """A value holding NaN comes as JSON (NaN as null) with the stored text beside it; a value
    that is not JSON at all comes as its text."""
    nan = MemoryPut(("odd",), "nan", '{"x": NaN, "text": "odd"}', None, "odd", text=True)
    raw = MemoryPut(("odd",), "raw", "plain <b>text</b>", None, "odd")
    writer.memory.run(MemoryCall(writes=(nan, raw)))
    server = serve()
    answer = server.get("/api/memory/items", params={"namespace": "odd"})
    assert answer.status_code == 200, answer.text
    shown = {item["key"]: item for item in answer.json()["items"]}
    assert shown["nan"]["value"] == {"x": None, "text": "odd"}
    assert shown["nan"]["value_json"] == '{"x": NaN, "text": "odd"}'
    assert shown["raw"]["value"] == "plain <b>text</b>"
