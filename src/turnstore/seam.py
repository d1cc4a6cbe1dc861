"""The one seam for parts built on the store: integrations, and anyone writing one.

A part takes what its user hands it (an open `turnstore.Store` / `BlockingStore`, or a URL)
and `borrow`s it: `Shared.store` and `Shared.blocking` are its own async and blocking faces
on the store's one engine, and closing the `Shared` closes only what the borrow opened.
Beyond the seam a part uses the public names (`turnstore`, `turnstore.records`,
`turnstore.events`, `turnstore.errors`) and the checks below, which refuse input as the
store itself would, before the part's first call (`top_field_equal`: a memory search's
condition the store narrows by), `json_loads` for a framework's own JSON (what
`json.loads` returns, faster), and how a memory search by words reads a query and a value
(`query_term_words`, `value_word_list`, within `MAX_TERMS` terms and `MAX_QUERY_CHARS`
characters), for a part that ranks what the store found its own way.
"""

from __future__ import annotations

from turnstore.faces.shared import Shared, borrow
from turnstore.records.base import json_loads
from turnstore.rules.saves import catalog_line
from turnstore.rules.search import MAX_QUERY_CHARS, MAX_TERMS, query_term_words, value_word_list
from turnstore.rules.validation import optional_identifier, top_field_equal, validate_session_id

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "Shared",
    "borrow",
    "catalog_line",
    "json_loads",
    "optional_identifier",
    "query_term_words",
    "top_field_equal",
    "validate_session_id",
    "value_word_list",
]
