"""A two-region fleet whose global tier is Route 53, for the provider tests against moto."""

from __future__ import annotations

import json

from drctl.config.schema import FleetConfig, parse_config

TARGETS = {"us-west-1": "west.lb.example.net", "us-east-1": "east.lb.example.net"}


def fleet(moto_url: str, zone: str, domain: str = "example.com", health_checks: bool = True) -> FleetConfig:
    """A fleet whose global tier is Route 53 zone `zone` (an ID or a name), record api.<domain>;
    `health_checks=False`: records keep health checks drctl does not own."""
    return parse_config(
        f"""
name: r53
regions:
  - {{name: us-west-1, weight: 60, gateway_url: "http://127.0.0.1:1", kube: {{api_url: "http://127.0.0.1:2"}}}}
  - {{name: us-east-1, weight: 40, gateway_url: "http://127.0.0.1:3", kube: {{api_url: "http://127.0.0.1:4"}},
      route53_set_identifier: use1}}
traffic:
  global_endpoint: http://api.{domain}
  global:
    kind: route53
    hosted_zone_id: "{zone}"
    record_name: api.{domain}
    ttl_s: 15
    targets: {json.dumps(TARGETS)}
    health_check: {{enabled: {str(health_checks).lower()}}}
  regional: {{kind: gateway-api}}
aws: {{region: us-east-1, endpoint_url: "{moto_url}"}}
"""
    )
