"""Who is acting (drctl.client.identity), four eyes' comparison, and the approval notice's text."""

from __future__ import annotations

import getpass
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from drctl.client import identity as ident
from drctl.config.schema import FleetConfig
from drctl.models import notify as n
from drctl.models.phases import same_identity
from tests.support.cli import drctl
from tests.support.config import fleet_config_data, write_config
from workflows.approval import reminder_before_s

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def fleet_config() -> FleetConfig:
    return FleetConfig.model_validate(fleet_config_data())


def test_drctl_identity_beats_the_config_which_beats_user_at_host(fleet_config: FleetConfig) -> None:
    named = fleet_config.model_copy(
        update={"temporal": fleet_config.temporal.model_copy(update={"identity": "svc-key@acme"})}
    )
    assert ident.identity(named, {"DRCTL_IDENTITY": "  alice@acme.example "}) == "alice@acme.example"
    assert ident.identity(named, {"DRCTL_IDENTITY": "  "}) == "svc-key@acme"  # blank: unset
    assert ident.identity(fleet_config, {}) == f"{getpass.getuser()}@{socket.gethostname()}"


def test_user_at_host_survives_a_missing_user_and_host(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_user() -> str:
        raise KeyError("getpwuid(): uid not found: 12345")  # a container's random UID

    def no_host() -> str:
        raise OSError("no hostname")

    monkeypatch.setattr(getpass, "getuser", no_user)
    monkeypatch.setattr(socket, "gethostname", no_host)
    assert ident.identity(None, {}) == f"uid{os.getuid()}@unknown-host"


@pytest.mark.parametrize(
    ("value", "words"),
    [("a\nb", "control characters"), ("x" * 201, "201 characters long (at most 200)")],
)
def test_an_unusable_identity_is_refused_naming_where(value: str, words: str) -> None:
    with pytest.raises(ident.IdentityError) as err:
        ident.identity(None, {"DRCTL_IDENTITY": value})
    assert str(err.value).startswith("DRCTL_IDENTITY: ") and words in str(err.value)


def test_cli_with_a_bad_identity_exits_2_in_one_line_before_connecting(
    fleet_config: FleetConfig, tmp_path: Path
) -> None:
    path = write_config(fleet_config, tmp_path)
    done = drctl("ops", "list", "-c", str(path), env={"DRCTL_IDENTITY": "x" * 300})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == "error: DRCTL_IDENTITY: the identity is 300 characters long (at most 200)"


def test_four_eyes_compares_principals_not_spelling() -> None:
    assert same_identity("Alice@Example.com ", "alice@example.com")
    assert not same_identity("alice@laptop", "alice@desktop")  # set DRCTL_IDENTITY to be one person


def test_the_reminder_goes_at_80_percent_unless_configured() -> None:
    assert reminder_before_s(900, None) == 180
    assert reminder_before_s(900, 60) == 60
    assert reminder_before_s(30, 45) == 30  # a spec from a config that skipped validation: at once


def test_the_approval_notice_names_the_operation_initiator_commands_and_time_left() -> None:
    e = n.approval_pending(
        "prod",
        "failover/prod",
        AT,
        what="failover to us-east-1",
        initiator="alice@acme",
        left_s=900,
        reminder=False,
    )
    assert e.summary == (
        "[prod] failover to us-east-1 started by alice@acme waits for approval, 15 min left: "
        "`drctl ops approve failover/prod` (another identity) or `drctl ops reject failover/prod`"
    )
    assert (e.kind, e.severity, e.action) == ("approval.pending", "warning", None)  # no PagerDuty incident
    assert e.details["times_out_at"] == "2026-12-01T09:15:00+00:00" and e.details["initiator"] == "alice@acme"
    late = n.approval_pending(
        "prod", "failover/prod", AT, what="failover to us-east-1", initiator=None, left_s=30, reminder=True
    )
    assert late.summary.startswith("[prod] reminder: failover to us-east-1 started by unknown waits")
    assert "30 s left" in late.summary and late.details["reminder"] is True
