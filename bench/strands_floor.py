"""The floor of a Strands save on turnstore: one store commit per write, nothing else.

`FloorRepository` is not a usable repository: it keeps the session and agents in memory,
reads nothing, checks nothing, and writes only what Strands hands it, one commit each (an
append of the message's item per `create_message`, a state write per `update_agent`), in
the store's own calls. Its save is the least any repository on turnstore's write path could
cost, so `strands-file / floor` on tmpfs is the ceiling of the ratio the save target asks
for there.
"""

from __future__ import annotations

from typing import Any

from strands.session.session_repository import SessionRepository
from strands.types.session import Session, SessionAgent, SessionMessage, encode_bytes_values

import turnstore


class FloorRepository(SessionRepository):
    """One commit per write Strands makes; the session and agents kept in memory."""

    def __init__(self, url: str) -> None:
        self.store = turnstore.open_blocking(url)
        self.sessions: dict[str, Session] = {}
        self.agents: dict[tuple[str, str], SessionAgent] = {}

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        """Kept in memory."""
        self.sessions[session.session_id] = session
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        """From memory."""
        return self.sessions.get(session_id)

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Kept in memory."""
        self.agents[session_id, session_agent.agent_id] = session_agent

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        """From memory."""
        return self.agents.get((session_id, agent_id))

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """One state write."""
        self.store.save_state(f"strands/{session_id}", "agent", session_agent.to_dict())

    def create_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """One append of the message as an item."""
        item = encode_bytes_values(session_message.message)
        self.store.append_context(f"strands/{session_id}", [item], kind="strands")

    def read_message(
        self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
    ) -> SessionMessage | None:
        """Not kept."""
        return None

    def update_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Not kept."""

    def list_messages(
        self,
        session_id: str,
        agent_id: str,
        limit: int | None = None,
        offset: int = 0,
        **kwargs: Any,
    ) -> list[SessionMessage]:
        """Not kept."""
        return []
