"""Service IP and port allocation, as the API server's Service REST storage does it.

A create gets a clusterIP (and clusterIPs) from the service CIDR and, for NodePort and
LoadBalancer Services, a nodePort per port from 30000-32767. A requested IP or port already held by
another Service is a 422. An update that leaves them unset keeps the allocated ones
(patchAllocatedValues in pkg/registry/core/service/storage), and one that changes clusterIP is a
422: the field is immutable.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from drctl.devstack.label_selector import ApiError

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)


def _invalid(name: str, cause: str) -> ApiError:
    return ApiError(422, "Invalid", f'Service "{name}" is invalid: {cause}')


def _held(others: list[dict[str, Any]]) -> tuple[set[str], set[int]]:
    ips: set[str] = set()
    ports: set[int] = set()
    for svc in others:
        spec = svc.get("spec") or {}
        ips.update(ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None")
        ports.update(int(p["nodePort"]) for p in spec.get("ports") or [] if p.get("nodePort"))
    return ips, ports


def allocate(svc: dict[str, Any], others: list[dict[str, Any]], old: dict[str, Any] | None = None) -> None:
    """Fill in spec.clusterIP(s) and nodePorts of `svc` in place; `others` are the cluster's other Services."""
    name = svc["metadata"]["name"]
    spec = svc.setdefault("spec", {})
    ips, ports = _held(others)
    old_spec = (old or {}).get("spec") or {}
    if old is not None:
        was = old_spec.get("clusterIP")
        if not spec.get("clusterIP") and not spec.get("clusterIPs"):
            spec["clusterIP"], spec["clusterIPs"] = was, old_spec.get("clusterIPs") or [was]
        elif spec.get("clusterIP", was) != was:
            raise _invalid(
                name, f'spec.clusterIPs[0]: Invalid value: ["{spec["clusterIP"]}"]: may not change once set'
            )
    ip = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
    if not ip:
        free = (str(a) for a in SERVICE_CIDR.hosts() if str(a) not in ips)
        ip = next(free, None)
        if ip is None:
            raise _invalid(name, "spec.clusterIPs: Internal error: range is full")
    elif ip != "None" and old is None:
        if ip in ips:
            raise _invalid(
                name,
                f'spec.clusterIPs: Invalid value: ["{ip}"]: failed to allocate IP {ip}: '
                "provided IP is already allocated",
            )
        try:
            if ipaddress.ip_address(ip) not in SERVICE_CIDR:
                raise _invalid(
                    name, f'spec.clusterIPs: Invalid value: ["{ip}"]: provided IP is not in the valid range'
                )
        except ValueError:
            raise _invalid(
                name, f'spec.clusterIPs[0]: Invalid value: "{ip}": must be a valid IP address'
            ) from None
    spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
    spec.setdefault("type", "ClusterIP")
    if spec["type"] not in ("NodePort", "LoadBalancer"):
        for i, port in enumerate(spec.get("ports") or []):
            if port.get("nodePort"):
                raise _invalid(
                    name,
                    f"spec.ports[{i}].nodePort: Forbidden: may not be used when `type` is '{spec['type']}'",
                )
        return
    kept = {(p.get("port"), p.get("protocol", "TCP")): p.get("nodePort") for p in old_spec.get("ports") or []}
    for i, port in enumerate(spec.get("ports") or []):
        wanted = port.get("nodePort") or kept.get((port.get("port"), port.get("protocol", "TCP")))
        if wanted:
            if int(wanted) not in NODE_PORTS:
                raise _invalid(
                    name,
                    f"spec.ports[{i}].nodePort: Invalid value: {wanted}: provided port is not in the valid range",
                )
            if int(wanted) in ports:
                raise _invalid(
                    name,
                    f"spec.ports[{i}].nodePort: Invalid value: {wanted}: provided port is already allocated",
                )
            port["nodePort"] = int(wanted)
        else:
            port["nodePort"] = next((p for p in NODE_PORTS if p not in ports), None)
            if port["nodePort"] is None:
                raise _invalid(name, f"spec.ports[{i}].nodePort: Internal error: range is full")
        ports.add(port["nodePort"])
