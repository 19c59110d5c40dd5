"""Route 53 global tier: one weighted record per region (SetIdentifier), all under one name.

A weight change is one ChangeResourceRecordSets call with one UPSERT per region, which Route 53
applies atomically. The call answers PENDING at once; the change is INSYNC on every authoritative
server only later (AWS documents "generally within 60 seconds"). So applying and waiting are two
steps: `apply_weights` returns the change id, `is_propagated` asks GetChange.

botocore's own retries are off for this client: Throttling and PriorRequestNotComplete surface at
once and the activity retries them with backoff, so every retry is one visible, counted attempt
instead of botocore's hidden attempts multiplied by the activity's. botocore errors propagate
unchanged; the activities layer maps them (drctl/providers/errors.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from botocore.config import Config

from drctl.config.schema import FleetConfig, Route53Global
from drctl.providers import aws
from drctl.providers.base import AppliedWeights
from drctl.providers.route53_health import Ensured, HealthChecks, HealthCheckSpec, judge_observations
from drctl.providers.weights import validate_weights

ROUTE53_MAX_WEIGHT = 255
log = logging.getLogger(__name__)
# Health checks ensured recently, per (fleet, zone), in this worker process: a weight change (the
# failover's shift) then only attaches their ids, and pays for the listing and any creation only
# when nothing ensured them in this long. Reads of the weights (the monitor's ticks, status) ensure
# them too, so the shift path is normally warm.
HEALTH_CHECKS_FRESH_S = 300.0
_ensured: dict[tuple[str, str], tuple[float, Ensured]] = {}


def _fqdn(name: str) -> str:
    return name if name.endswith(".") else name + "."


def route53_client(cfg: FleetConfig) -> Any:
    """A boto3 Route 53 client honouring aws.endpoint_url, without botocore's retries (see above)."""
    return aws.client(cfg, "route53", config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


class Route53GlobalTraffic:
    """Weighted records `record_name` of one hosted zone; region → SetIdentifier and record value."""

    def __init__(
        self,
        client: Any,
        zone: str,
        record_name: str,
        record_type: str,
        ttl_s: int,
        targets: dict[str, str],
        set_identifiers: dict[str, str] | None = None,
        insync_timeout_s: float = 120.0,
        insync_poll_s: float = 2.0,
        health_checks: HealthChecks | None = None,
    ) -> None:
        """Args:
        zone: hosted zone ID (`Z...` or `/hostedzone/Z...`), or a zone name (contains a dot) to look up.
        targets: record value per region.
        set_identifiers: SetIdentifier per region; default the region name.
        health_checks: the health checks drctl owns, attached to every record it writes (None: the
            records keep whatever health check they have).
        """
        self.client = client
        self.zone = zone
        self.record_name = _fqdn(record_name)
        self.record_type = record_type
        self.ttl_s = ttl_s
        self.targets = dict(targets)
        self.set_identifiers = {r: (set_identifiers or {}).get(r, r) for r in targets}
        self.insync_timeout_s = insync_timeout_s
        self.insync_poll_s = insync_poll_s
        self._zone_id: str | None = None
        self.health_checks = health_checks
        # What the last read or apply found changed outside drctl (health checks, records' ids).
        self.drift: list[str] = []

    @classmethod
    def from_config(cls, cfg: FleetConfig, client: Any | None = None) -> Route53GlobalTraffic:
        tier = cfg.traffic.global_tier
        if not isinstance(tier, Route53Global):
            raise ValueError(f"traffic.global.kind is {tier.kind!r}, not 'route53'")
        client = client or route53_client(cfg)
        return cls(
            client,
            tier.hosted_zone_id,
            tier.record_name,
            tier.record_type,
            tier.ttl_s,
            {r: tier.targets[r] for r in cfg.region_names},
            {r.name: r.set_identifier for r in cfg.regions},
            health_checks=owned_health_checks(cfg, client) if tier.health_check.enabled else None,
        )

    @property
    def regions(self) -> list[str]:
        return list(self.targets)

    def zone_id(self) -> str:
        """The hosted zone ID, looked up by name once when the config gives a name."""
        if self._zone_id is None:
            if "." not in self.zone.strip("."):
                self._zone_id = self.zone.removeprefix("/hostedzone/")
            else:
                name = _fqdn(self.zone)
                found = self.client.list_hosted_zones_by_name(DNSName=name, MaxItems="100")["HostedZones"]
                ids = [z["Id"].removeprefix("/hostedzone/") for z in found if z["Name"] == name]
                if len(ids) != 1:
                    raise LookupError(
                        f"{len(ids)} hosted zones are named {name!r}; give traffic.global.hosted_zone_id"
                    )
                self._zone_id = ids[0]
        return self._zone_id

    def _records(self) -> list[dict[str, Any]]:
        """The weighted record sets of record_name/record_type (paged: a name may hold many)."""
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "HostedZoneId": self.zone_id(),
            "StartRecordName": self.record_name,
            "StartRecordType": self.record_type,
        }
        while True:
            page = self.client.list_resource_record_sets(**kwargs)
            for rrs in page["ResourceRecordSets"]:
                if rrs["Name"] != self.record_name or rrs["Type"] != self.record_type:
                    # Listing is sorted by name then type, so the first other record ends the set.
                    return out
                out.append(rrs)
            if not page.get("IsTruncated"):
                return out
            kwargs.update(
                StartRecordName=page["NextRecordName"],
                StartRecordType=page["NextRecordType"],
                **(
                    {"StartRecordIdentifier": page["NextRecordIdentifier"]}
                    if "NextRecordIdentifier" in page
                    else {}
                ),
            )

    def get_weights(self) -> dict[str, int]:
        """Weight of each region that has a weighted record; regions without one are left out.

        Keeps the fleet's health checks ensured on the way (best effort: a read never fails on them)."""
        self._health_checks(must=False)
        return self._weights_of(self._records())

    def _health_checks(self, must: bool) -> Ensured | None:
        """The fleet's health checks, ensured at most every HEALTH_CHECKS_FRESH_S in this process.

        Never an obstacle to moving traffic: an error here is logged and the records keep the health
        checks they have (`must` only says whether a stale cache is worth a new listing now)."""
        if self.health_checks is None:
            return None
        key = (self.health_checks.fleet, self.zone)
        now = time.monotonic()
        cached = _ensured.get(key)
        self.drift = []
        if cached is not None and now - cached[0] < HEALTH_CHECKS_FRESH_S:
            return cached[1]
        try:
            ensured = self.health_checks.ensure()
        except Exception as exc:  # noqa: BLE001 - any AWS or network error: traffic moves regardless
            log.warning("Route 53 health checks of fleet %s not ensured: %s", key[0], exc)
            return cached[1] if cached is not None and must else None
        self.drift = list(ensured.drift)
        for line in ensured.drift:
            log.warning("Route 53 drift: %s", line)
        _ensured[key] = (now, ensured)
        return ensured

    def _weights_of(self, records: Iterable[dict[str, Any]]) -> dict[str, int]:
        by_id = {sid: region for region, sid in self.set_identifiers.items()}
        return {
            by_id[rrs["SetIdentifier"]]: int(rrs["Weight"])
            for rrs in records
            if rrs.get("SetIdentifier") in by_id and "Weight" in rrs
        }

    def _group_ttl(self, existing: dict[Any, dict[str, Any]]) -> int:
        """The TTL every non-alias record of the weighted group shares (the config's for a new group).

        Resolvers cache each record for its own TTL, so unequal TTLs skew the split away from the
        weights; a group that already disagrees is refused, naming each record's TTL.
        """
        ttls = {str(sid): int(rrs["TTL"]) for sid, rrs in existing.items() if "TTL" in rrs}
        if len(set(ttls.values())) > 1:
            raise ValueError(
                f"weighted records {self.record_name} {self.record_type} have different TTLs {ttls}; "
                "make them equal before drctl changes weights"
            )
        return next(iter(ttls.values()), self.ttl_s)

    def _record(
        self, region: str, weight: int, existing: dict[Any, dict[str, Any]], ttl: int
    ) -> dict[str, Any]:
        sid = self.set_identifiers[region]
        if sid in existing:
            # Everything the record has, as listed (HealthCheckId, AliasTarget, Region, Failover,
            # GeoLocation, MultiValueAnswer, CidrRoutingConfig...), so the UPSERT drops nothing.
            return {**existing[sid], "Weight": weight}
        return {
            "Name": self.record_name,
            "Type": self.record_type,
            "SetIdentifier": sid,
            "Weight": weight,
            "TTL": ttl,
            "ResourceRecords": [{"Value": self.targets[region]}],
        }

    def apply_weights(self, weights: dict[str, int]) -> AppliedWeights:
        """UPSERT every given region's record in one change batch; return without waiting for INSYNC.

        An UPSERT replaces the whole record set, so each region's record is resent as it is now
        (health check, TTL, alias target, routing fields...) with only its Weight changed. A region
        without a record gets a new one, with the TTL its weighted group already has.
        """
        validate_weights(weights, self.regions, max_weight=ROUTE53_MAX_WEIGHT, what="region")
        existing = {rrs.get("SetIdentifier"): rrs for rrs in self._records()}
        if set(weights) != set(self.regions):
            current = {r: 0 for r in self.regions} | self._weights_of(existing.values())
            validate_weights(
                weights, self.regions, max_weight=ROUTE53_MAX_WEIGHT, what="region", current=current
            )
        ttl = self._group_ttl(existing)
        records = {region: self._record(region, weight, existing, ttl) for region, weight in weights.items()}
        ensured = self._health_checks(must=True)
        if ensured is not None:
            for region, rrs in records.items():
                mine = ensured.ids.get(region)
                theirs = rrs.get("HealthCheckId")
                if theirs and theirs != mine and theirs not in ensured.stale:
                    line = (
                        f"{region}: record {self.set_identifiers[region]} named health check {theirs}, "
                        f"not drctl's; drctl attaches its own ({mine})"
                    )
                    log.warning("Route 53 drift: %s", line)
                    self.drift.append(line)
                if mine:
                    rrs["HealthCheckId"] = mine
        changes = [{"Action": "UPSERT", "ResourceRecordSet": rrs} for rrs in records.values()]
        info = self.client.change_resource_record_sets(
            HostedZoneId=self.zone_id(),
            ChangeBatch={"Comment": f"drctl: region weights {weights}"[:256], "Changes": changes},
        )["ChangeInfo"]
        if ensured is not None and ensured.stale and set(weights) == set(self.regions):
            # No record names them now (the UPSERT above re-pointed every record of ours).
            try:
                self.health_checks.delete(ensured.stale)  # type: ignore[union-attr]
                ensured.stale = []
            except Exception as exc:  # noqa: BLE001 - tagged stale: the next ensure deletes them
                log.warning("Route 53: stale health checks %s not deleted yet: %s", ensured.stale, exc)
        return AppliedWeights(
            change_id=info["Id"], propagated=info["Status"] == "INSYNC", status=info["Status"]
        )

    def change_status(self, change_id: str) -> str:
        """GetChange: PENDING or INSYNC."""
        return str(self.client.get_change(Id=change_id)["ChangeInfo"]["Status"])

    def is_propagated(self, change_id: str) -> bool:
        return self.change_status(change_id) == "INSYNC"

    def set_weights(self, weights: dict[str, int]) -> None:
        """apply_weights, then poll until INSYNC (scripts only; workflows use the two steps)."""
        applied = self.apply_weights(weights)
        if applied.propagated or applied.change_id is None:
            return
        deadline = time.monotonic() + self.insync_timeout_s
        while not self.is_propagated(applied.change_id):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Route 53 change {applied.change_id} still PENDING after {self.insync_timeout_s:g}s"
                )
            time.sleep(self.insync_poll_s)

    def data_plane_out(self) -> dict[str, str]:
        """Regions whose drctl-owned health check Route 53 judges unhealthy: its records then stop
        being answered whatever their weight. One GetHealthCheckStatus per region; the check ids come
        from the ensured set this process keeps for HEALTH_CHECKS_FRESH_S (as every read and write
        uses), so a watch reading every few seconds lists no health checks and stays far under Route
        53's five requests a second per account."""
        ensured = self._health_checks(must=False)
        if ensured is None:
            return {}
        out: dict[str, str] = {}
        for region, hc_id in ensured.ids.items():
            if region not in self.targets:
                continue
            status = self.client.get_health_check_status(HealthCheckId=hc_id)
            healthy, why = judge_observations(status.get("HealthCheckObservations", []))
            if not healthy:
                out[region] = f"Route 53 health check {hc_id}: {why}"
        return out


def owned_health_checks(cfg: FleetConfig, client: Any) -> HealthChecks:
    """The fleet's Route 53 health checks, one per region, as traffic.global.health_check sets them."""
    tier = cfg.traffic.global_tier
    assert isinstance(tier, Route53Global)
    hc = tier.health_check
    port = hc.port or (443 if hc.protocol == "HTTPS" else 80)
    specs = {
        r: HealthCheckSpec(
            target=hc.targets.get(r, tier.targets[r]),
            port=port,
            protocol=hc.protocol,
            path=hc.path,
            request_interval_s=hc.request_interval_s,
            failure_threshold=hc.failure_threshold,
        )
        for r in cfg.region_names
    }
    return HealthChecks(client, cfg.name, specs)
