"""docs/monitoring.md cannot drift from the code: every instrument, `/metrics` series and
logger the package creates is named on the page, and the page names none that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "monitoring.md").read_text()
SOURCE = ROOT / "src" / "turnstore"


def _section(heading: str) -> str:
    """The page's text from `heading` to the next heading of its level or above."""
    level = heading.split(" ")[0]
    start = PAGE.index(f"\n{heading}\n")
    ends = [
        m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", PAGE[start + 1 :], re.MULTILINE)
    ]
    return PAGE[start : start + 1 + ends[1]] if len(ends) > 1 else PAGE[start:]


def _found(pattern: str, *paths: Path) -> set[str]:
    return {match for path in paths for match in re.findall(pattern, path.read_text())}


def test_every_opentelemetry_instrument_is_documented() -> None:
    """Each `meter.create_*("turnstore.…")` is in the page's metrics table, and no other."""
    created = _found(r'create_\w+\(\s*"(turnstore\.[a-z_.]+)"', SOURCE / "telemetry.py")
    assert created == {
        "turnstore.operation.duration",
        "turnstore.commit.batch_size",
        "turnstore.retries",
        "turnstore.conflicts",
        "turnstore.lease.expiries",
    }
    table = _section("### Metrics")
    listed = set(re.findall(r"^\| `(turnstore\.[a-z_.]+)` \|", table, re.MULTILINE))
    assert listed == created


def test_every_prometheus_series_is_documented() -> None:
    """Each `turnstore_…` family `/metrics` renders is in the page's series table."""
    families = _found(r'"(turnstore_[a-z_]+)"', SOURCE / "server" / "metrics.py")
    families.add("turnstore_info")  # the info family is named `turnstore` and gets `_info`
    listed = set(re.findall(r"^\| `(turnstore_[a-z_]+)[`{]", PAGE, re.MULTILINE))
    assert listed == families


def test_every_logger_is_documented() -> None:
    """Each `logging.getLogger("turnstore.…")` of the package is a row of the loggers table."""
    loggers = _found(r'getLogger\("(turnstore\.[a-z]+)"\)', *SOURCE.rglob("*.py"))
    table = _section("## Logs")
    listed = set(re.findall(r"^\| `(turnstore\.[a-z]+)` \|", table, re.MULTILINE))
    assert loggers <= listed
    assert listed - loggers <= {"turnstore.postgres"}  # the PostgreSQL engine's, once it logs
