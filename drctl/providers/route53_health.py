"""Route 53 health checks that drctl creates and owns: one per region record of the weighted group.

AWS's guidance for multi-region recovery (Well-Architected REL11, ARC) is to recover through the
data plane: Route 53 evaluates health checks on its own data plane and answers a weighted query
without a record whose health check fails, even while the Route 53 API (the control plane drctl
changes weights through) is impaired, and while drctl itself is down with the region that hosts
it. drctl's weights still decide while drctl runs; the health checks take a dead region out when it
cannot. So every region record carries its region's health check, on every UPSERT.

Ownership is by tags, not by CallerReference (a reference names one creation request; Route 53
refuses it again with other settings): each check drctl made carries `drctl:fleet`,
`drctl:region` and `drctl:spec`, a digest of the settings drctl gave it. On every ensure:
- a region without a check gets one;
- a check whose settings no longer match its `drctl:spec` was changed by someone else: that is
  reported as drift, and the check is put back to the config's settings;
- a check whose settings differ from the config (the config changed) is updated; settings that
  UpdateHealthCheck cannot change (Type, RequestInterval, MeasureLatency: API reference,
  UpdateHealthCheck) get a new check, and the old one is deleted once no record names it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any, Literal

TAG_FLEET = "drctl:fleet"
TAG_REGION = "drctl:region"
TAG_SPEC = "drctl:spec"
# A check replaced by a new one, to delete once no record names it (a failed apply keeps it tagged so).
TAG_STALE = "drctl:stale"
# UpdateHealthCheck cannot change these; a new check replaces the old one (API reference).
IMMUTABLE = ("Type", "RequestInterval", "MeasureLatency")
# ListTagsForResources takes at most 10 resource ids per call (API reference).
TAGS_PER_CALL = 10


@dataclass(frozen=True)
class HealthCheckSpec:
    """The settings of one region's health check, as drctl gives them to Route 53."""

    target: str  # the region's endpoint: a host name, or an IP address
    port: int = 443
    protocol: Literal["HTTP", "HTTPS"] = "HTTPS"
    path: str = "/health"
    request_interval_s: Literal[10, 30] = 10
    failure_threshold: int = 3

    def config(self) -> dict[str, Any]:
        """The HealthCheckConfig for CreateHealthCheck (the fields drctl sets, nothing else)."""
        cfg: dict[str, Any] = {
            "Type": self.protocol,
            "Port": self.port,
            "ResourcePath": self.path,
            "RequestInterval": self.request_interval_s,
            "FailureThreshold": self.failure_threshold,
            "MeasureLatency": False,
            "Inverted": False,
        }
        try:
            cfg["IPAddress"] = str(ip_address(self.target))
        except ValueError:
            cfg["FullyQualifiedDomainName"] = self.target
        if self.protocol == "HTTPS" and "FullyQualifiedDomainName" in cfg:
            cfg["EnableSNI"] = True  # the gateway's certificate is for its name
        return cfg

    def digest(self) -> str:
        return settings_digest(self.config())


# The settings drctl sets, and what Route 53 reads back for one it left out.
_KEYS = (
    "Type",
    "Port",
    "ResourcePath",
    "RequestInterval",
    "FailureThreshold",
    "MeasureLatency",
    "Inverted",
    "IPAddress",
    "FullyQualifiedDomainName",
    "EnableSNI",
)
_DEFAULTS = {"MeasureLatency": False, "Inverted": False, "EnableSNI": False}


def settings(config: dict[str, Any]) -> dict[str, Any]:
    """The settings drctl owns of a HealthCheckConfig, as built or as read back."""
    return {k: config.get(k, _DEFAULTS.get(k)) for k in _KEYS}


def settings_digest(config: dict[str, Any]) -> str:
    """A short digest of the settings drctl owns, read back from Route 53 or built from the config."""
    return hashlib.sha256(json.dumps(settings(config), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Ensured:
    """What `HealthChecks.ensure` found and did."""

    ids: dict[str, str] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)


class HealthChecks:
    """The fleet's health checks in one AWS account, one per region."""

    def __init__(self, client: Any, fleet: str, specs: dict[str, HealthCheckSpec]) -> None:
        self.client = client
        self.fleet = fleet
        self.specs = dict(specs)

    def _all(self) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {}
        while True:
            page = self.client.list_health_checks(**kwargs)
            yield from page.get("HealthChecks", [])
            if not page.get("IsTruncated"):
                return
            kwargs["Marker"] = page["NextMarker"]

    def _tags(self, ids: list[str]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for i in range(0, len(ids), TAGS_PER_CALL):
            sets = self.client.list_tags_for_resources(
                ResourceType="healthcheck", ResourceIds=ids[i : i + TAGS_PER_CALL]
            )["ResourceTagSets"]
            for s in sets:
                out[s["ResourceId"]] = {t["Key"]: t["Value"] for t in s.get("Tags", [])}
        return out

    def owned(self) -> dict[str, list[tuple[dict[str, Any], dict[str, str]]]]:
        """Region -> the checks tagged as this fleet's for it (normally one), with their tags."""
        checks = {hc["Id"]: hc for hc in self._all()}
        tags = self._tags(sorted(checks))
        out: dict[str, list[tuple[dict[str, Any], dict[str, str]]]] = {}
        for hc_id, hc in checks.items():
            t = tags.get(hc_id, {})
            if t.get(TAG_FLEET) == self.fleet and TAG_REGION in t:
                out.setdefault(t[TAG_REGION], []).append((hc, t))
        for mine in out.values():
            mine.sort(key=lambda pair: TAG_STALE in pair[1])  # the live one first
        return out

    def _create(self, region: str, spec: HealthCheckSpec) -> str:
        hc = self.client.create_health_check(
            # Unique per request: a retry after a lost answer makes a second, untagged check at worst,
            # which no record names; a fixed reference is refused once the settings change.
            CallerReference=f"drctl-{self.fleet}-{region}-{uuid.uuid4().hex[:12]}"[:64],
            HealthCheckConfig=spec.config(),
        )["HealthCheck"]
        self._tag(hc["Id"], region, spec.digest())
        return str(hc["Id"])

    def _tag(self, hc_id: str, region: str, digest: str) -> None:
        self.client.change_tags_for_resource(
            ResourceType="healthcheck",
            ResourceId=hc_id,
            AddTags=[
                {"Key": TAG_FLEET, "Value": self.fleet},
                {"Key": TAG_REGION, "Value": region},
                {"Key": TAG_SPEC, "Value": digest},
                {"Key": "Name", "Value": f"drctl {self.fleet} {region}"},
            ],
        )

    def ensure(self) -> Ensured:
        """Every region's check exists with the config's settings; drift is reported and undone."""
        out = Ensured()
        owned = self.owned()
        for region, spec in self.specs.items():
            mine = owned.get(region, [])
            out.stale += [h["Id"] for h, t in mine if TAG_STALE in t]
            mine = [(h, t) for h, t in mine if TAG_STALE not in t]
            if not mine:
                out.ids[region] = self._create(region, spec)
                continue
            (hc, tags), extra = mine[0], mine[1:]
            out.stale += [h["Id"] for h, _ in extra]
            actual = hc["HealthCheckConfig"]
            if settings_digest(actual) != tags.get(TAG_SPEC):
                out.drift.append(
                    f"{region}: health check {hc['Id']} was changed outside drctl "
                    f"({_differences(actual, spec.config())}); drctl puts its settings back"
                )
            if settings_digest(actual) == spec.digest():
                out.ids[region] = hc["Id"]
                if tags.get(TAG_SPEC) != spec.digest():
                    self._tag(hc["Id"], region, spec.digest())
                continue
            want = spec.config()
            if any(actual.get(k) != want.get(k) for k in IMMUTABLE):
                self.client.change_tags_for_resource(
                    ResourceType="healthcheck",
                    ResourceId=hc["Id"],
                    AddTags=[{"Key": TAG_STALE, "Value": "1"}],
                )
                out.ids[region] = self._create(region, spec)
                out.stale.append(hc["Id"])
            else:
                self._update(hc, want)
                self._tag(hc["Id"], region, spec.digest())
                out.ids[region] = hc["Id"]
        return out

    def _update(self, hc: dict[str, Any], want: dict[str, Any]) -> None:
        fields = {
            k: want[k]
            for k in ("Port", "ResourcePath", "FailureThreshold", "Inverted", "EnableSNI")
            if k in want
        }
        target = (
            {"IPAddress": want["IPAddress"]}
            if "IPAddress" in want
            else {"FullyQualifiedDomainName": want["FullyQualifiedDomainName"]}
        )
        self.client.update_health_check(
            HealthCheckId=hc["Id"], HealthCheckVersion=hc["HealthCheckVersion"], **fields, **target
        )

    def delete(self, ids: list[str]) -> None:
        """Delete checks no record names any more (after the UPSERT that re-pointed them)."""
        for hc_id in ids:
            self.client.delete_health_check(HealthCheckId=hc_id)


def _differences(actual: dict[str, Any], want: dict[str, Any]) -> str:
    a, w = settings(actual), settings(want)
    diffs = [f"{k} {a[k]!r} (drctl: {w[k]!r})" for k in _KEYS if a[k] != w[k]]
    return ", ".join(diffs) or "its drctl:spec tag"


# Route 53 judges an endpoint healthy when more than this share of its checkers report it healthy
# (Route 53 Developer Guide, "How Amazon Route 53 determines whether a health check is healthy").
HEALTHY_CHECKER_SHARE = 0.18


def judge_observations(observations: list[dict[str, Any]]) -> tuple[bool, str]:
    """(healthy, why) from GetHealthCheckStatus's HealthCheckObservations, as Route 53 judges them.
    No observation yet (a new check) is healthy: Route 53 starts a check healthy."""
    if not observations:
        return True, "no checker has reported yet"
    reports = [str((o.get("StatusReport") or {}).get("Status", "")) for o in observations]
    ok = sum(1 for r in reports if r.startswith("Success"))
    share = ok / len(reports)
    failed = next((r for r in reports if not r.startswith("Success")), "")
    why = f"{ok} of {len(reports)} checkers report healthy" + (f"; e.g. {failed[:200]}" if failed else "")
    return share > HEALTHY_CHECKER_SHARE, why
