"""The replication tests' fleet: two regions, one bucket replicated from us-west-1 to us-east-1.

Only `aws` and `data` matter to rclone; the other sections point at closed loopback ports.
"""

from __future__ import annotations

from drctl.config.schema import FleetConfig, parse_config

BASE = """
name: t
regions:
  - {{name: us-west-1, weight: 60, gateway_url: "http://127.0.0.1:1", kube: {{api_url: "http://127.0.0.1:2"}}}}
  - {{name: us-east-1, weight: 40, gateway_url: "http://127.0.0.1:3", kube: {{api_url: "http://127.0.0.1:4"}}}}
traffic: {{global_endpoint: "http://127.0.0.1:5", global: {{kind: haproxy, runtime_socket: /tmp/x.sock}},
          regional: {{kind: gateway-api}}}}
aws: {{region: us-east-1, endpoint_url: "{url}"}}
data:
{data}
"""


def fleet(url: str, src: str, dst: str, mode: str = "copy", extra: str = "") -> FleetConfig:
    """`src` (us-west-1) replicated into `dst` (us-east-1) through the S3 endpoint at `url`;
    `extra`: more lines of the `data:` section (indented two spaces)."""
    data = (
        f"  buckets:\n    - {{name: models, mode: {mode}, source: {{region: us-west-1, bucket: {src}}},\n"
        f"       replicas: [{{region: us-east-1, bucket: {dst}}}]}}\n{extra}"
    )
    return parse_config(BASE.format(url=url, data=data))
