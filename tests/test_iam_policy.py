"""The worker role's IAM policy (deploy/iam/drctl-worker-policy.json) grants exactly the AWS calls
drctl makes, on the objects the reference fleet config names, and nothing else.

The calls are read from the code: every boto3 client method (and paginator) of the services drctl
uses, found by name in botocore's own service models, so a new call fails here until the policy
grants it, and a grant no code needs fails here too. STS is not in the policy: the EKS token is a
presigned GetCallerIdentity, which needs no permission, and IRSA's AssumeRoleWithWebIdentity is
the role's trust policy, not this one.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import botocore.session
import yaml
from botocore import xform_name

from drctl.config.schema import FleetConfig

ROOT = Path(__file__).resolve().parents[1]
POLICY = json.loads((ROOT / "deploy" / "iam" / "drctl-worker-policy.json").read_text())
OVERLAYS = sorted((ROOT / "deploy" / "kubernetes" / "overlays").glob("*/fleet.yaml"))
SERVICES = ("route53", "s3", "eks", "sts", "ec2", "iam")
# An S3 operation whose IAM action has another name (the AWS Service Authorization Reference).
S3_ACTION = {"ListObjectsV2": "ListBucket", "ListObjects": "ListBucket", "HeadObject": "GetObject"}
# Client methods every service has: not API calls.
GENERIC = {"get_paginator", "get_waiter", "can_paginate", "close", "generate_presigned_url"}


def _operations() -> dict[str, tuple[str, str]]:
    """snake_case method name -> (service, OperationName), for the services drctl may call."""
    session = botocore.session.get_session()
    out: dict[str, tuple[str, str]] = {}
    for service in SERVICES:
        for op in session.get_service_model(service).operation_names:
            out.setdefault(xform_name(op), (service, op))
    return out


def _product_files() -> list[Path]:
    return [
        p
        for root in ("drctl", "activities")
        for p in sorted((ROOT / root).rglob("*.py"))
        if "devstack" not in p.parts  # the emulation is not the product
    ]


def code_calls() -> dict[str, list[str]]:
    """IAM action -> where the code calls it, e.g. {"s3:PutObject": ["drctl/providers/x.py:12"]}."""
    ops = _operations()
    found: dict[str, list[str]] = {}
    for path in _product_files():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            if name == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
                name = str(node.args[0].value)
            elif name in GENERIC or name not in ops:
                continue
            if name not in ops:
                continue
            service, op = ops[name]
            if not _boto_receiver(node.func.value):
                continue
            action = f"{service}:{S3_ACTION.get(op, op) if service == 's3' else op}"
            found.setdefault(action, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _boto_receiver(receiver: ast.expr) -> bool:
    # Method names such as `get_object` or `list_objects` are common (drctl's own rclone wrapper has
    # one): only a call on a boto3 client (`self.s3`, `self.client`, `route53_client(...)`) counts.
    # A client made in the expression (`aws.client(cfg, "s3").put_object(...)`) counts as well.
    return re.search(r"\b(s3|route53|client|(route53_)?client\(.*\))$", ast.unparse(receiver)) is not None


def _statements() -> list[dict[str, Any]]:
    return POLICY["Statement"]


def _as_list(v: str | list[str]) -> list[str]:
    return [v] if isinstance(v, str) else v


def test_the_scanner_sees_the_calls_it_must() -> None:
    calls = code_calls()
    for action in ("route53:ChangeResourceRecordSets", "route53:GetChange", "s3:PutObject", "s3:ListBucket"):
        assert action in calls, action


def test_the_policy_grants_every_call_and_nothing_else() -> None:
    calls = code_calls()
    cfgs = [FleetConfig.model_validate(yaml.safe_load(p.read_text())) for p in OVERLAYS]
    # The zone is looked up by name only when the config gives a name instead of an ID.
    needed = set(calls)
    if all(re.fullmatch(r"Z[A-Z0-9]+", getattr(c.traffic.global_tier, "hosted_zone_id", "")) for c in cfgs):
        needed.discard("route53:ListHostedZonesByName")
    granted = {a for s in _statements() for a in _as_list(s["Action"])}
    assert all(s["Effect"] == "Allow" for s in _statements())
    assert not [a for a in granted if "*" in a], "wildcard actions"
    missing = {a: calls[a] for a in needed - granted}
    assert not missing, f"the code calls these but the policy does not grant them: {missing}"
    assert not granted - needed, f"granted but never called: {sorted(granted - needed)}"


HEALTH_CHECK_ACTIONS = {
    "route53:ChangeTagsForResource",
    "route53:DeleteHealthCheck",
    "route53:GetHealthCheckStatus",
    "route53:ListTagsForResources",
    "route53:UpdateHealthCheck",
}


def test_every_resource_is_one_the_fleet_config_names() -> None:
    cfgs = [FleetConfig.model_validate(yaml.safe_load(p.read_text())) for p in OVERLAYS]
    zones = {f"arn:aws:route53:::hostedzone/{c.traffic.global_tier.hosted_zone_id}" for c in cfgs}  # type: ignore[union-attr]
    buckets = (
        {c.drills.history_bucket for c in cfgs}
        | {c.failover.audit_bucket or c.drills.history_bucket for c in cfgs}
        | {loc.bucket for c in cfgs for b in c.data.buckets for loc in (b.source, *b.replicas)}
    )
    fleets = {c.name for c in cfgs}
    src = (ROOT / "drctl" / "providers" / "drill_reports.py").read_text()
    object_prefixes = set(re.findall(r'f"(\w+)/\{fleet\}/', src))
    # The break-glass audit record: <audit bucket>/breakglass/<fleet>/<time>.json (rec.id is fleet/time).
    breakglass = (ROOT / "drctl" / "worker" / "breakglass.py").read_text()
    (audit_prefix,) = re.findall(r'^KEY_PREFIX = "(\w+)"', breakglass, re.M)
    assert 'f"{KEY_PREFIX}/{rec.id}.json"' in breakglass and 'id=f"{cfg.name}/' in breakglass
    object_prefixes.add(audit_prefix)
    list_prefixes = set(re.findall(r'Prefix=f"(\w+)/\{fleet\}/"', src))
    # The tier watch lists the fleet's break-glass records (activities/tier_watch.py).
    watch = (ROOT / "activities" / "tier_watch.py").read_text()
    assert re.findall(r'^BREAKGLASS_PREFIX = "(\w+)"', watch, re.M) == [audit_prefix]
    assert 'prefix = f"{BREAKGLASS_PREFIX}/{self.cfg.name}/"' in watch
    list_prefixes.add(audit_prefix)
    assert object_prefixes and list_prefixes
    allowed_objects = {
        f"arn:aws:s3:::{b}/{p}/{f}/*" for b in buckets for p in object_prefixes for f in fleets
    }
    for s in _statements():
        actions = _as_list(s["Action"])
        for resource in _as_list(s["Resource"]):
            if resource.startswith("arn:aws:route53:::hostedzone/"):
                assert resource in zones, resource
            elif resource.startswith("arn:aws:route53:::change/"):
                assert actions == ["route53:GetChange"] and resource == "arn:aws:route53:::change/*"
            elif resource.startswith("arn:aws:route53:::healthcheck/"):
                # The health checks drctl owns (tagged with the fleet): Route 53 has no tag conditions.
                assert resource == "arn:aws:route53:::healthcheck/*", resource
                assert set(actions) <= HEALTH_CHECK_ACTIONS, actions
            elif resource == "*":
                # Route 53 takes no resource for these two (API reference: CreateHealthCheck, ListHealthChecks).
                assert set(actions) <= {"route53:CreateHealthCheck", "route53:ListHealthChecks"}, actions
            elif resource.startswith("arn:aws:s3:::") and "/" in resource.removeprefix("arn:aws:s3:::"):
                assert resource in allowed_objects, resource
            elif resource.startswith("arn:aws:s3:::"):
                assert resource.removeprefix("arn:aws:s3:::") in buckets and actions == ["s3:ListBucket"], s
                # Listing is limited to the prefixes the code lists, of this fleet.
                prefixes = s["Condition"]["StringLike"]["s3:prefix"]
                assert set(prefixes) == {f"{p}/{f}/*" for p in list_prefixes for f in fleets}
            else:
                raise AssertionError(f"a resource the fleet config does not name: {resource}")
    # ... and every prefix the code writes and reads, of each fleet, is granted (the break-glass
    # record is written from a worker pod, with this role, while Temporal is down).
    granted = {r for s in _statements() for r in _as_list(s["Resource"])}
    for c in cfgs:
        audit = c.failover.audit_bucket or c.drills.history_bucket
        for prefix in object_prefixes:
            bucket = audit if prefix == audit_prefix else c.drills.history_bucket
            assert f"arn:aws:s3:::{bucket}/{prefix}/{c.name}/*" in granted, (prefix, c.name)
    # Only the one record of the fleet, only UPSERTs, only its type.
    (change,) = [s for s in _statements() if "route53:ChangeResourceRecordSets" in _as_list(s["Action"])]
    cond = change["Condition"]["ForAllValues:StringEquals"]
    glob = [c.traffic.global_tier for c in cfgs]
    assert cond["route53:ChangeResourceRecordSetsNormalizedRecordNames"] == sorted(
        {g.record_name for g in glob}
    )  # type: ignore[union-attr]
    assert cond["route53:ChangeResourceRecordSetsRecordTypes"] == sorted({g.record_type for g in glob})  # type: ignore[union-attr]
    assert cond["route53:ChangeResourceRecordSetsActions"] == ["UPSERT"]
    route53_src = (ROOT / "drctl" / "providers" / "route53.py").read_text()
    assert set(re.findall(r'"Action": "(\w+)"', route53_src)) == {"UPSERT"}


def test_the_production_docs_name_the_policy() -> None:
    doc = (ROOT / "docs" / "production.md").read_text()
    assert "deploy/iam/drctl-worker-policy.json" in doc
