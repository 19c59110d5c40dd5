"""A break-glass audit record is a file like any other (issue 28): a hostile one is refused by name
before anything is imported, and what an import shows in the Temporal UI (memo, search attributes)
is escaped and bounded, as every operation's is."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from drctl.client import operations
from drctl.config.schema import load_config
from drctl.models import search_attributes as sa
from drctl.models.breakglass import BreakGlassRecord
from drctl.models.safe_text import SUMMARY_CHARS
from drctl.worker import breakglass as bg
from tests.hostile.sink_cases import COMBINED, assert_shown_safely
from tests.support.config import write_fleet_config

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def _record(**changes: Any) -> dict[str, Any]:
    rec = BreakGlassRecord(
        id=f"test/{AT:%Y%m%dT%H%M%S}Z",
        fleet="test",
        who="oncall@example.com",
        host="worker-us-east-1-0",
        started_at=AT,
        finished_at=AT,
        source="us-west-1",
        target="us-east-1",
        forced=False,
        status="succeeded",
        temporal="no answer from Temporal at 127.0.0.1:7233 within 5 s",
    )
    return rec.model_dump(mode="json") | changes


CASES = {
    "who with an escape": ({"who": "oncall\x1b[2J"}, "who"),
    "host with a bidi override": ({"host": "pod\u202eevil"}, "host"),
    "who with a newline": ({"who": "a\nFORGED: imported"}, "who"),
    "who too long": ({"who": "x" * 300}, "who"),
    "a target the fleet does not have": ({"target": "eu-west-9"}, "eu-west-9"),
    "a source the fleet does not have": ({"source": "us-west-1,mars-1"}, "mars-1"),
    "an id of another fleet": ({"id": "prod/20261203T080000Z"}, "prod/20261203T080000Z"),
}


@pytest.mark.parametrize(("changes", "named"), CASES.values(), ids=list(CASES))
def test_a_hostile_record_is_refused_naming_what_is_wrong(
    tmp_path: Path, changes: dict[str, Any], named: str
) -> None:
    cfg = load_config(write_fleet_config(tmp_path))
    path = tmp_path / "record.json"
    path.write_text(json.dumps(_record(**changes)))
    with pytest.raises(ValueError) as refused:
        bg.load(cfg, str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and named.split("\n")[0][:20] in message, message


def test_a_good_record_loads(tmp_path: Path) -> None:
    cfg = load_config(write_fleet_config(tmp_path))
    path = tmp_path / "record.json"
    path.write_text(json.dumps(_record()))
    assert bg.load(cfg, str(path)).who == "oncall@example.com"


def test_an_operations_memo_and_initiator_attribute_are_escaped_and_bounded() -> None:
    memo = operations.memo_of("demo", "restore", COMBINED, None, "us-east-1", {"backup": COMBINED})
    for key in ("initiator", "backup"):
        assert_shown_safely(memo[key], SUMMARY_CHARS, f"memo {key}")
    assert memo["target"] == "us-east-1" and memo["source"] is None
    attrs = operations.search_attributes("demo", "failover", "us-west-1", "us-east-1", COMBINED)
    assert_shown_safely(attrs.get(sa.INITIATOR) or "", SUMMARY_CHARS, "DrctlInitiator")
    # A plain identity is recorded as it is.
    plain = operations.search_attributes("demo", "failover", initiator="oncall@example.com")
    assert plain.get(sa.INITIATOR) == "oncall@example.com"
