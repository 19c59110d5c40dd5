"""The Route 53 health checks drctl creates and owns, against a real moto server, read back as created.

Each region record must carry its region's health check on every UPSERT (an UPSERT replaces the
whole record set, so a weight change that left it out would drop it), and a change drctl did not make
must be seen. The settings are checked against the Route 53 API reference (CreateHealthCheck,
HealthCheckConfig): RequestInterval 10 or 30, FailureThreshold 1..10, EnableSNI for HTTPS by name.
"""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from drctl.config.schema import FleetConfig
from drctl.providers import route53
from drctl.providers.route53 import Route53GlobalTraffic
from drctl.providers.route53_health import TAG_FLEET, TAG_REGION, TAG_SPEC
from tests.support.route53_config import TARGETS, fleet
from tests.support.route53_standin import Route53StandIn


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # Every call ensures afresh (a worker does so every HEALTH_CHECKS_FRESH_S): these tests change
    # the checks between calls and look at what the next one does.
    monkeypatch.setattr(route53, "HEALTH_CHECKS_FRESH_S", 0.0)


@pytest.fixture
def zone(moto_url: str) -> tuple[str, str]:
    client = boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url)
    name = f"h{uuid.uuid4().hex[:8]}.example.com"
    zid = client.create_hosted_zone(Name=name, CallerReference=name)["HostedZone"]["Id"]
    return name, zid


def _client(moto_url: str) -> Any:
    return boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url)


def _named(cfg: FleetConfig, fleet_name: str, **health: Any) -> FleetConfig:
    tier = cfg.traffic.global_tier
    hc = tier.health_check.model_copy(update=health)  # type: ignore[union-attr]
    traffic = cfg.traffic.model_copy(update={"global_tier": tier.model_copy(update={"health_check": hc})})
    return cfg.model_copy(update={"name": fleet_name, "traffic": traffic})


def _ours(moto_url: str, fleet_name: str) -> dict[str, dict[str, Any]]:
    """Region -> the health check tagged as this fleet's, with its tags under 'Tags'."""
    c = _client(moto_url)
    checks = {h["Id"]: h for h in c.list_health_checks()["HealthChecks"]}
    out: dict[str, dict[str, Any]] = {}
    ids = sorted(checks)
    for i in range(0, len(ids), 10):
        for s in c.list_tags_for_resources(ResourceType="healthcheck", ResourceIds=ids[i : i + 10])[
            "ResourceTagSets"
        ]:
            tags = {t["Key"]: t["Value"] for t in s["Tags"]}
            if tags.get(TAG_FLEET) == fleet_name:
                out[tags[TAG_REGION]] = {**checks[s["ResourceId"]], "Tags": tags}
    return out


def _records(moto_url: str, zid: str) -> dict[str, dict[str, Any]]:
    sets = _client(moto_url).list_resource_record_sets(HostedZoneId=zid)["ResourceRecordSets"]
    return {s["SetIdentifier"]: s for s in sets if "SetIdentifier" in s}


def test_first_weight_change_creates_one_owned_check_per_region_and_every_record_carries_it(
    moto_url: str, zone: tuple[str, str]
) -> None:
    name, zid = zone
    fleet_name = f"f{uuid.uuid4().hex[:6]}"
    r53 = Route53GlobalTraffic.from_config(_named(fleet(moto_url, zid, name), fleet_name))
    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    ours = _ours(moto_url, fleet_name)
    assert set(ours) == {"us-west-1", "us-east-1"}
    for region, hc in ours.items():
        cfg = hc["HealthCheckConfig"]
        # As the API reference defines them, and as the config's defaults say.
        assert cfg["Type"] == "HTTPS" and cfg["Port"] == 443 and cfg["ResourcePath"] == "/health"
        assert cfg["FullyQualifiedDomainName"] == TARGETS[region] and cfg["EnableSNI"] is True
        assert cfg["RequestInterval"] in (10, 30) and cfg["RequestInterval"] == 10
        assert 1 <= cfg["FailureThreshold"] <= 10 and cfg["FailureThreshold"] == 3
        assert hc["Tags"][TAG_SPEC] and hc["Tags"]["Name"] == f"drctl {fleet_name} {region}"
    records = _records(moto_url, zid)
    assert records["us-west-1"]["HealthCheckId"] == ours["us-west-1"]["Id"]
    assert records["use1"]["HealthCheckId"] == ours["us-east-1"]["Id"]
    assert r53.drift == []

    # The next change creates nothing and still sends the ids (an UPSERT without them drops them).
    r53.set_weights({"us-west-1": 0, "us-east-1": 100})
    again = _ours(moto_url, fleet_name)
    assert {r: h["Id"] for r, h in again.items()} == {r: h["Id"] for r, h in ours.items()}
    records = _records(moto_url, zid)
    assert records["us-west-1"]["Weight"] == 0
    assert records["us-west-1"]["HealthCheckId"] == ours["us-west-1"]["Id"]
    assert records["use1"]["HealthCheckId"] == ours["us-east-1"]["Id"]


def test_a_change_drctl_did_not_make_is_reported_and_undone(moto_url: str, zone: tuple[str, str]) -> None:
    name, zid = zone
    fleet_name = f"f{uuid.uuid4().hex[:6]}"
    r53 = Route53GlobalTraffic.from_config(_named(fleet(moto_url, zid, name), fleet_name))
    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    west = _ours(moto_url, fleet_name)["us-west-1"]
    _client(moto_url).update_health_check(
        HealthCheckId=west["Id"], HealthCheckVersion=west["HealthCheckVersion"], FailureThreshold=9
    )
    r53.set_weights({"us-west-1": 50, "us-east-1": 50})
    assert len(r53.drift) == 1, r53.drift
    assert r53.drift[0].startswith(f"us-west-1: health check {west['Id']} was changed outside drctl")
    assert "FailureThreshold 9 (drctl: 3)" in r53.drift[0]
    assert _ours(moto_url, fleet_name)["us-west-1"]["HealthCheckConfig"]["FailureThreshold"] == 3
    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    assert r53.drift == []  # put back: nothing to report the next time


def test_a_foreign_health_check_on_a_record_is_reported_and_replaced(
    moto_url: str, zone: tuple[str, str]
) -> None:
    name, zid = zone
    fleet_name = f"f{uuid.uuid4().hex[:6]}"
    r53 = Route53GlobalTraffic.from_config(_named(fleet(moto_url, zid, name), fleet_name))
    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    foreign = _client(moto_url).create_health_check(
        CallerReference=uuid.uuid4().hex,
        HealthCheckConfig={"Type": "TCP", "IPAddress": "192.0.2.1", "Port": 80},
    )["HealthCheck"]["Id"]
    rec = _records(moto_url, zid)["us-west-1"]
    _client(moto_url).change_resource_record_sets(
        HostedZoneId=zid,
        ChangeBatch={
            "Changes": [{"Action": "UPSERT", "ResourceRecordSet": {**rec, "HealthCheckId": foreign}}]
        },
    )
    r53.set_weights({"us-west-1": 50, "us-east-1": 50})
    assert any(f"named health check {foreign}, not drctl's" in d for d in r53.drift), r53.drift
    assert (
        _records(moto_url, zid)["us-west-1"]["HealthCheckId"]
        == _ours(moto_url, fleet_name)["us-west-1"]["Id"]
    )


def test_a_new_interval_replaces_the_check_and_the_old_one_is_deleted(
    moto_url: str, zone: tuple[str, str]
) -> None:
    name, zid = zone
    fleet_name = f"f{uuid.uuid4().hex[:6]}"
    base = fleet(moto_url, zid, name)
    Route53GlobalTraffic.from_config(_named(base, fleet_name)).set_weights({"us-west-1": 60, "us-east-1": 40})
    before = _ours(moto_url, fleet_name)
    # RequestInterval cannot be updated (UpdateHealthCheck): a new check, records re-pointed, old gone.
    slow = Route53GlobalTraffic.from_config(
        _named(base, fleet_name, request_interval_s=30, failure_threshold=2)
    )
    slow.set_weights({"us-west-1": 60, "us-east-1": 40})
    after = _ours(moto_url, fleet_name)
    assert slow.drift == []
    assert all(after[r]["Id"] != before[r]["Id"] for r in before)
    assert all(after[r]["HealthCheckConfig"]["RequestInterval"] == 30 for r in after)
    remaining = {h["Id"] for h in _client(moto_url).list_health_checks()["HealthChecks"]}
    assert not {h["Id"] for h in before.values()} & remaining
    records = _records(moto_url, zid)
    assert records["us-west-1"]["HealthCheckId"] == after["us-west-1"]["Id"]
    # A threshold alone is updated in place.
    quick = Route53GlobalTraffic.from_config(
        _named(base, fleet_name, request_interval_s=30, failure_threshold=5)
    )
    quick.set_weights({"us-west-1": 60, "us-east-1": 40})
    same = _ours(moto_url, fleet_name)
    assert {r: h["Id"] for r, h in same.items()} == {r: h["Id"] for r, h in after.items()}
    assert all(h["HealthCheckConfig"]["FailureThreshold"] == 5 for h in same.values())


def test_another_fleets_checks_are_left_alone_and_many_checks_are_read_in_batches(
    moto_url: str, zone: tuple[str, str]
) -> None:
    name, zid = zone
    base = fleet(moto_url, zid, name)
    other = f"o{uuid.uuid4().hex[:6]}"
    # Twelve checks of another fleet first: more than one ListTagsForResources call (10 ids each).
    for i in range(6):
        Route53GlobalTraffic.from_config(_named(base, f"{other}{i}")).set_weights(
            {"us-west-1": 60, "us-east-1": 40}
        )
    theirs = {i: _ours(moto_url, f"{other}{i}") for i in range(6)}
    mine = f"m{uuid.uuid4().hex[:6]}"
    Route53GlobalTraffic.from_config(_named(base, mine)).set_weights({"us-west-1": 60, "us-east-1": 40})
    assert set(_ours(moto_url, mine)) == {"us-west-1", "us-east-1"}
    assert {i: _ours(moto_url, f"{other}{i}") for i in range(6)} == theirs


def test_the_shift_path_reuses_what_was_ensured_and_an_aws_error_never_blocks_it(
    moto_url: str, zone: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, zid = zone
    fleet_name = f"f{uuid.uuid4().hex[:6]}"
    cfg = _named(fleet(moto_url, zid, name), fleet_name)
    monkeypatch.setattr(route53, "HEALTH_CHECKS_FRESH_S", 300.0)
    # A read (the monitor's tick, status) ensures them; the shift then lists nothing.
    assert Route53GlobalTraffic.from_config(cfg).get_weights() == {}
    ours = _ours(moto_url, fleet_name)
    shift = Route53GlobalTraffic.from_config(cfg)
    calls: list[str] = []
    shift.client.meta.events.register("before-call.route53", lambda model, **_: calls.append(model.name))
    shift.set_weights({"us-west-1": 0, "us-east-1": 100})
    assert "ListHealthChecks" not in calls and "CreateHealthCheck" not in calls, calls
    assert _records(moto_url, zid)["us-west-1"]["HealthCheckId"] == ours["us-west-1"]["Id"]
    # Health checks that cannot be listed (an IAM policy without them, an outage) never stop a shift.
    monkeypatch.setattr(route53, "HEALTH_CHECKS_FRESH_S", 0.0)
    with Route53StandIn(moto_url, pending_s=0) as standin:
        standin.inject("GET /2013-04-01/healthcheck", "AccessDenied", "AccessDenied")
        r53 = Route53GlobalTraffic.from_config(
            _named(fleet(standin.url, zid, name), f"b{uuid.uuid4().hex[:6]}")
        )
        r53.set_weights({"us-west-1": 60, "us-east-1": 40})
        assert standin.calls["GET /2013-04-01/healthcheck"] == 1
        assert r53.get_weights() == {"us-west-1": 60, "us-east-1": 40}


def test_data_plane_out_asks_route53_for_each_owned_check_s_status(
    moto_url: str, zone: tuple[str, str]
) -> None:
    """GetHealthCheckStatus per region's owned check, as the API defines it (moto's checkers always
    report success, so no region is out; the judgement itself is tests/units/test_tier_watch.py's)."""
    name, zid = zone
    fleet_name = f"f{uuid.uuid4().hex[:6]}"
    r53 = Route53GlobalTraffic.from_config(_named(fleet(moto_url, zid, name), fleet_name))
    asked: list[str] = []
    status = r53.client.get_health_check_status

    def counted(**kwargs: Any) -> Any:
        asked.append(kwargs["HealthCheckId"])
        return status(**kwargs)

    r53.client.get_health_check_status = counted
    # The checks are ensured on the way, as every read does; then one status call per region's check.
    assert r53.data_plane_out() == {}
    ours = _ours(moto_url, fleet_name)
    assert set(ours) == {"us-west-1", "us-east-1"}
    assert sorted(asked) == sorted(h["Id"] for h in ours.values())
