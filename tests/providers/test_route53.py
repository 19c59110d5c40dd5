"""Route 53 global tier against a real moto server subprocess (the `moto_url` fixture).

moto's request recorder (`/moto-api/recorder/*`) logs every API call the provider makes, which is
how these tests prove a weight shift is exactly one change batch.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.exceptions
import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.traffic import TrafficActivities
from drctl.models.activity_io import SetWeightsInput
from drctl.models.traffic import PropagationInput
from drctl.providers.errors import classify
from drctl.providers.route53 import Route53GlobalTraffic
from drctl.providers.traffic_factory import global_traffic
from tests.support.route53_config import TARGETS, fleet
from tests.support.route53_standin import Route53StandIn
from tests.support.wait import wait_until


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # moto accepts any credentials, but botocore refuses to sign without some.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def zone(moto_url: str) -> tuple[str, str]:
    """A fresh hosted zone per test: (name, id)."""
    client = boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url)
    name = f"t{uuid.uuid4().hex[:8]}.example.com"
    zid = client.create_hosted_zone(Name=name, CallerReference=name)["HostedZone"]["Id"]
    return name, zid


def record_sets(moto_url: str, zone_id: str, name: str) -> dict[str, tuple[int, int, str]]:
    client = boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url)
    sets = client.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    return {
        s["SetIdentifier"]: (s["Weight"], s["TTL"], s["ResourceRecords"][0]["Value"])
        for s in sets
        if s["Name"] == f"api.{name}." and s["Type"] == "CNAME"
    }


class Recorder:
    """moto's server-side log of the API calls made while it is on."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> Recorder:
        httpx.post(f"{self.url}/moto-api/recorder/reset-recording").raise_for_status()
        httpx.post(f"{self.url}/moto-api/recorder/start-recording").raise_for_status()
        return self

    def __exit__(self, *exc: object) -> None:
        httpx.post(f"{self.url}/moto-api/recorder/stop-recording").raise_for_status()
        text = httpx.get(f"{self.url}/moto-api/recorder/download-recording").text
        self.calls: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines() if line.strip()]

    def change_batches(self) -> list[str]:
        """Decoded XML bodies of every ChangeResourceRecordSets call."""
        out = []
        for call in self.calls:
            if call["method"] == "POST" and re.search(r"/hostedzone/[^/]+/rrset/?$", call["url"]):
                body = call["body"]
                out.append(base64.b64decode(body).decode() if not body.lstrip().startswith("<") else body)
        return out


def test_set_read_back_and_shift_in_one_batch(moto_url: str, zone: tuple[str, str]) -> None:
    name, zid = zone
    r53 = global_traffic(fleet(moto_url, zid, name))
    assert isinstance(r53, Route53GlobalTraffic)
    assert r53.get_weights() == {}

    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    assert r53.get_weights() == {"us-west-1": 60, "us-east-1": 40}
    assert record_sets(moto_url, zid, name) == {
        "us-west-1": (60, 15, TARGETS["us-west-1"]),
        "use1": (40, 15, TARGETS["us-east-1"]),
    }

    with Recorder(moto_url) as rec:
        r53.set_weights({"us-west-1": 0, "us-east-1": 100})
    batches = rec.change_batches()
    assert len(batches) == 1, batches
    assert batches[0].count("<Change>") == 2
    assert batches[0].count("<Action>UPSERT</Action>") == 2
    assert record_sets(moto_url, zid, name) == {
        "us-west-1": (0, 15, TARGETS["us-west-1"]),
        "use1": (100, 15, TARGETS["us-east-1"]),
    }
    assert r53.get_weights() == {"us-west-1": 0, "us-east-1": 100}


def test_zone_looked_up_by_name_and_partial_update(moto_url: str, zone: tuple[str, str]) -> None:
    name, zid = zone
    r53 = Route53GlobalTraffic.from_config(fleet(moto_url, name, name))
    assert r53.zone_id() == zid.removeprefix("/hostedzone/")
    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    with Recorder(moto_url) as rec:
        r53.set_weights({"us-east-1": 0})
    assert [b.count("<Change>") for b in rec.change_batches()] == [1]
    assert r53.get_weights() == {"us-west-1": 60, "us-east-1": 0}


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"us-west-1": 256, "us-east-1": 1}, "us-west-1"),
        ({"us-west-1": 1, "eu-west-9": 1}, "eu-west-9"),
        ({"us-west-1": 0, "us-east-1": 0}, "all zero"),
        ({"us-west-1": 0}, "all zero"),  # us-east-1 is already 0
        ({"us-west-1": "50"}, "us-west-1"),
    ],
)
def test_bad_weights_send_nothing(
    moto_url: str, zone: tuple[str, str], weights: dict[str, int], message: str
) -> None:
    name, zid = zone
    r53 = Route53GlobalTraffic.from_config(fleet(moto_url, zid, name))
    r53.set_weights({"us-west-1": 10, "us-east-1": 0})
    with Recorder(moto_url) as rec, pytest.raises(ValueError, match=message):
        r53.set_weights(weights)
    assert rec.change_batches() == []
    assert r53.get_weights() == {"us-west-1": 10, "us-east-1": 0}


def test_aws_errors_propagate(moto_url: str) -> None:
    r53 = Route53GlobalTraffic.from_config(fleet(moto_url, "ZNOSUCHZONE0000"))
    with pytest.raises(botocore.exceptions.ClientError, match="NoSuchHostedZone"):
        r53.set_weights({"us-west-1": 1, "us-east-1": 1})
    with pytest.raises(LookupError, match="nosuch.example.org"):
        Route53GlobalTraffic.from_config(fleet(moto_url, "nosuch.example.org")).get_weights()


# --- Route 53 as it really behaves: PENDING for a while, throttling (tests/support/route53_standin.py) --------


@pytest.fixture
def standin(moto_url: str) -> Iterator[Route53StandIn]:
    with Route53StandIn(moto_url, pending_s=1.5) as r53:
        yield r53


def test_apply_returns_pending_at_once_and_insync_comes_later(
    standin: Route53StandIn, moto_url: str, zone: tuple[str, str]
) -> None:
    name, zid = zone
    r53 = Route53GlobalTraffic.from_config(fleet(standin.url, zid, name))
    t0 = time.monotonic()
    applied = r53.apply_weights({"us-west-1": 0, "us-east-1": 100})
    assert applied.propagated is False and applied.status == "PENDING" and applied.change_id
    # Route 53 serves the new records from its API at once; only propagation lags.
    assert record_sets(moto_url, zid, name)["use1"][0] == 100
    assert r53.is_propagated(applied.change_id) is False
    wait_until(
        lambda: r53.is_propagated(applied.change_id or ""), timeout_s=10, interval_s=0.2, what="INSYNC"
    )
    assert time.monotonic() - t0 >= 1.5
    assert standin.calls["ChangeResourceRecordSets"] == 1


def test_set_weights_for_scripts_blocks_until_insync(standin: Route53StandIn, zone: tuple[str, str]) -> None:
    name, zid = zone
    r53 = Route53GlobalTraffic.from_config(fleet(standin.url, zid, name))
    r53.insync_poll_s = 0.2
    t0 = time.monotonic()
    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    assert time.monotonic() - t0 >= 1.5
    assert standin.calls["ChangeResourceRecordSets"] == 1 and standin.calls["GetChange"] >= 2


@pytest.mark.parametrize(
    ("code", "kind"), [("Throttling", "RateLimited"), ("PriorRequestNotComplete", "Conflict")]
)
def test_throttling_reaches_the_activity_once_and_is_retryable(
    standin: Route53StandIn, zone: tuple[str, str], code: str, kind: str
) -> None:
    """botocore's retries are off: one refused request is one error, which the activity retries with backoff."""
    name, zid = zone
    cfg = fleet(standin.url, zid, name)
    standin.inject("ChangeResourceRecordSets", code)
    with pytest.raises(botocore.exceptions.ClientError, match=code) as err:
        Route53GlobalTraffic.from_config(cfg).apply_weights({"us-west-1": 1, "us-east-1": 1})
    assert standin.calls["ChangeResourceRecordSets"] == 1
    assert classify(err.value).kind == kind and classify(err.value).retryable
    # Through the activity: the same refusal as a retryable ApplicationError of that type.
    standin.inject("ChangeResourceRecordSets", code)
    with pytest.raises(ApplicationError) as app:
        ActivityEnvironment().run(
            TrafficActivities(cfg).set_global_weights,
            SetWeightsInput(weights={"us-west-1": 1, "us-east-1": 1}),
        )
    assert app.value.type == kind and not app.value.non_retryable
    assert standin.calls["ChangeResourceRecordSets"] == 2


def test_wait_activity_heartbeats_backs_off_when_throttled_and_reports_insync(
    standin: Route53StandIn, zone: tuple[str, str]
) -> None:
    name, zid = zone
    acts = TrafficActivities(fleet(standin.url, zid, name))
    applied = ActivityEnvironment().run(
        acts.set_global_weights, SetWeightsInput(weights={"us-west-1": 0, "us-east-1": 100})
    )
    assert (
        applied.propagated is False
        and applied.change_id
        and applied.weights == {"us-west-1": 0, "us-east-1": 100}
    )
    standin.inject("GetChange", "Throttling", "Throttling")
    env = ActivityEnvironment()
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    res = env.run(
        acts.wait_global_propagation, PropagationInput(change_id=applied.change_id, timeout_s=20, poll_s=0.2)
    )
    assert res.propagated and res.status == "INSYNC" and res.waited_s >= 1.0
    assert res.last_error and "Throttling" in res.last_error
    assert len(beats) == res.polls >= 3  # two throttled polls (backing off 0.4 s, 0.8 s), then INSYNC
    assert standin.calls["ChangeResourceRecordSets"] == 1


def test_wait_activity_deadline_is_an_answer_not_an_error(
    standin: Route53StandIn, zone: tuple[str, str]
) -> None:
    name, zid = zone
    standin.pending_s = 600
    acts = TrafficActivities(fleet(standin.url, zid, name))
    applied = ActivityEnvironment().run(
        acts.set_global_weights, SetWeightsInput(weights={"us-west-1": 60, "us-east-1": 40})
    )
    assert applied.change_id
    deadline_s = 1.0
    res = ActivityEnvironment().run(
        acts.wait_global_propagation,
        PropagationInput(change_id=applied.change_id, timeout_s=deadline_s, poll_s=0.3),
    )
    # Waited its whole deadline, and stopped there: a small multiple of it, not the 600 s PENDING.
    assert res.propagated is False and res.status == "PENDING" and deadline_s <= res.waited_s < 5 * deadline_s
    assert standin.calls["ChangeResourceRecordSets"] == 1


def _rrsets(moto_url: str, zone_id: str, name: str) -> dict[str, dict[str, Any]]:
    client = boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url)
    sets = client.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    return {s["SetIdentifier"]: s for s in sets if s["Name"] == f"api.{name}." and "SetIdentifier" in s}


def _seed(moto_url: str, zone_id: str, records: list[dict[str, Any]]) -> None:
    client = boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url)
    client.change_resource_record_sets(
        HostedZoneId=zone_id,
        ChangeBatch={"Changes": [{"Action": "CREATE", "ResourceRecordSet": r} for r in records]},
    )


def _health_check(moto_url: str, host: str) -> str:
    client = boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url)
    return str(
        client.create_health_check(
            CallerReference=uuid.uuid4().hex,
            HealthCheckConfig={"Type": "HTTPS", "FullyQualifiedDomainName": host, "ResourcePath": "/health"},
        )["HealthCheck"]["Id"]
    )


def test_weight_change_keeps_health_check_alias_and_ttl(moto_url: str, zone: tuple[str, str]) -> None:
    """UPSERT replaces the whole record set: everything but Weight must come back as it was (with
    traffic.global.health_check off, the records' own health checks are the operator's)."""
    name, zid = zone
    west_hc, east_hc = (
        _health_check(moto_url, TARGETS["us-west-1"]),
        _health_check(moto_url, TARGETS["us-east-1"]),
    )
    alias = {
        "HostedZoneId": zid.removeprefix("/hostedzone/"),
        "DNSName": f"east-lb.{name}.",
        "EvaluateTargetHealth": True,
    }
    api = f"api.{name}."
    _seed(
        moto_url,
        zid,
        [
            # TTL 30 where the config says 15: the record's own TTL is what it keeps.
            {
                "Name": api,
                "Type": "CNAME",
                "SetIdentifier": "us-west-1",
                "Weight": 60,
                "TTL": 30,
                "ResourceRecords": [{"Value": TARGETS["us-west-1"]}],
                "HealthCheckId": west_hc,
            },
            {
                "Name": api,
                "Type": "CNAME",
                "SetIdentifier": "use1",
                "Weight": 40,
                "AliasTarget": alias,
                "HealthCheckId": east_hc,
            },
        ],
    )
    before = _rrsets(moto_url, zid, name)
    r53 = Route53GlobalTraffic.from_config(fleet(moto_url, zid, name, health_checks=False))
    r53.set_weights({"us-west-1": 0, "us-east-1": 255})
    after = _rrsets(moto_url, zid, name)
    assert r53.get_weights() == {"us-west-1": 0, "us-east-1": 255}
    assert after["us-west-1"] == {**before["us-west-1"], "Weight": 0}
    assert after["use1"] == {**before["use1"], "Weight": 255}
    assert after["us-west-1"]["HealthCheckId"] == west_hc and after["us-west-1"]["TTL"] == 30
    assert (
        after["use1"]["HealthCheckId"] == east_hc
        and after["use1"]["AliasTarget"]["DNSName"] == alias["DNSName"]
    )
    assert "TTL" not in after["use1"]


def test_new_record_joins_with_the_group_ttl_and_unequal_ttls_are_refused(
    moto_url: str, zone: tuple[str, str]
) -> None:
    name, zid = zone
    api = f"api.{name}."
    west = {
        "Name": api,
        "Type": "CNAME",
        "SetIdentifier": "us-west-1",
        "Weight": 60,
        "TTL": 45,
        "ResourceRecords": [{"Value": TARGETS["us-west-1"]}],
    }
    _seed(moto_url, zid, [west])
    r53 = Route53GlobalTraffic.from_config(fleet(moto_url, zid, name))
    r53.set_weights({"us-west-1": 60, "us-east-1": 40})
    assert record_sets(moto_url, zid, name) == {
        "us-west-1": (60, 45, TARGETS["us-west-1"]),
        "use1": (40, 45, TARGETS["us-east-1"]),  # the group's TTL, not the config's 15
    }
    name2, zid2 = (
        f"u{name}",
        boto3.client("route53", region_name="us-east-1", endpoint_url=moto_url).create_hosted_zone(
            Name=f"u{name}", CallerReference=f"u{name}"
        )["HostedZone"]["Id"],
    )
    east = {
        "Name": f"api.{name2}.",
        "Type": "CNAME",
        "SetIdentifier": "use1",
        "Weight": 40,
        "TTL": 300,
        "ResourceRecords": [{"Value": TARGETS["us-east-1"]}],
    }
    _seed(moto_url, zid2, [{**west, "Name": f"api.{name2}."}, east])
    skewed = Route53GlobalTraffic.from_config(fleet(moto_url, zid2, name2))
    with (
        Recorder(moto_url) as rec,
        pytest.raises(ValueError, match=r"different TTLs .*'us-west-1': 45.*'use1': 300"),
    ):
        skewed.set_weights({"us-west-1": 0, "us-east-1": 100})
    assert rec.change_batches() == []
    assert skewed.get_weights() == {"us-west-1": 60, "us-east-1": 40}
