"""A graph killed mid-step keeps, on our saver, what LangGraph's `SqliteSaver` keeps, in each
durability mode: no finished task runs again after a crash where it would not with theirs.

Each case runs `_langgraph_crash_child.py` twice per saver: once killed (SIGKILL) in the graph's
second step, after one of its two tasks finished, and once to reload and finish the run. What
the reload sees (next nodes, tasks whose writes were kept, values) and how often each node ran
in all must be the same on both savers, and what LangGraph promises for the mode: `sync` and
`async` (LangGraph's default) keep the first step's checkpoint and the finished task's writes,
so only the killed task runs again; `exit` keeps nothing of a run that never exited, so the
whole graph runs again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.peers

CHILD = Path(__file__).with_name("_langgraph_crash_child.py")

KEPT = {"next": ["slow"], "written": ["fast"], "done": ["fast", "first"]}
"""What `sync` and `async` keep: the checkpoint after `first`, and `fast`'s writes (which the
reloaded state shows applied, leaving `slow` to run)."""
EXPECTED = {
    "sync": (KEPT, {"first": 1, "fast": 1, "slow": 2, "last": 1}),
    "async": (KEPT, {"first": 1, "fast": 1, "slow": 2, "last": 1}),
    "exit": (
        {"next": [], "written": [], "done": []},
        {"first": 2, "fast": 2, "slow": 2, "last": 1},
    ),
}
"""Per mode: what the reload sees, and how often each node ran in the killed run and the next."""


def _crashed(saver: str, target: str, mode: str, folder: Path) -> tuple[Any, Any, Counter[str]]:
    """Kill a run mid-step, then reload and finish it: (what was kept, the final values, the
    runs of each node)."""
    folder.mkdir()
    log = folder / "runs.log"
    args = [sys.executable, str(CHILD), saver, target, f"crash-{mode}", mode, str(log)]
    child = subprocess.Popen([*args, "run"], stderr=subprocess.PIPE, text=True)
    ready = Path(f"{log}.ready")
    deadline = time.monotonic() + 60
    while not ready.exists():
        if child.poll() is not None:
            pytest.fail(f"the {saver} run ended before its kill: {child.communicate()[1]}")
        if time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the {saver} run never reached its second step: {child.communicate()[1]}")
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    resumed = subprocess.run([*args, "resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    kept, final = (json.loads(line) for line in resumed.stdout.splitlines())
    return kept, final, Counter(log.read_text().split())


_PEER: dict[str, tuple[Any, Any, Counter[str]]] = {}
"""`SqliteSaver`'s outcome per mode, the same beside either of our backends: run once."""


@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
def test_a_graph_killed_mid_step_keeps_what_sqlite_saver_keeps(
    mode, store_url, tmp_path, tmp_path_factory
):
    ours = _crashed("turnstore", store_url, mode, tmp_path / "ours")
    if mode not in _PEER:
        folder = tmp_path_factory.mktemp(f"peer-{mode}")
        _PEER[mode] = _crashed("sqlite", str(folder / "peer.sqlite3"), mode, folder / "run")
    theirs = _PEER[mode]
    assert ours == theirs
    kept, runs = EXPECTED[mode]
    assert ours[0] == kept
    assert ours[1] == {"final": ["fast", "first", "last", "slow"]}
    assert ours[2] == Counter(runs)
