"""Read a region's stable release: the Deployment's image, model and env names, and /v1/models."""

from __future__ import annotations

from typing import Any

import httpx

from drctl.config.schema import FleetConfig
from drctl.models.release import Release
from drctl.providers.errors import ProviderError
from drctl.providers.kubernetes import REQUEST_TIMEOUT, KubernetesPlatform

_MODEL_FLAGS = ("--model", "--served-model-name")


def model_of(container: Any) -> str | None:
    """vLLM's `--model X` / `--served-model-name X` (or `serve X`), else a *MODEL env value."""
    args = [*(container.command or []), *(container.args or [])]
    for i, a in enumerate(args):
        for flag in _MODEL_FLAGS:
            if a == flag and i + 1 < len(args):
                return str(args[i + 1])
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
        if a == "serve" and i + 1 < len(args) and not args[i + 1].startswith("-"):
            return str(args[i + 1])
    for e in container.env or []:
        if e.name.upper().endswith("MODEL") and e.value:
            return str(e.value)
    return None


class ReleaseReader:
    def __init__(self, cfg: FleetConfig, timeout_s: float = 5.0) -> None:
        self.cfg = cfg
        self.timeout_s = timeout_s

    def deployment(self, region: str, rel: Release) -> None:
        platform = KubernetesPlatform(self.cfg.region(region))
        try:
            name = self.cfg.workload.deployment_name("stable")
            dep = platform._call(
                f"get deployments {platform.namespace}/{name}",
                lambda: platform.apps.read_namespaced_deployment(
                    name, platform.namespace, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        finally:
            platform.close()
        spec = dep.spec.template.spec
        containers = (spec.containers if spec else None) or []
        if containers:
            c = containers[0]
            rel.image, rel.model = c.image, model_of(c)
            rel.env_names = sorted(e.name for e in c.env or [])

    def served_models(self, region: str) -> list[str]:
        url = self.cfg.region(region).gateway_url.rstrip("/") + "/v1/models"
        resp = httpx.get(url, timeout=self.timeout_s)
        resp.raise_for_status()
        return sorted(str(m["id"]) for m in resp.json().get("data", []))

    def read(self, region: str) -> Release:
        """Never raises: what could not be read is named in `error`."""
        rel = Release(region=region)
        errors = []
        try:
            self.deployment(region, rel)
        except ProviderError as exc:
            errors.append(str(exc))
        try:
            rel.served_models = self.served_models(region)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            errors.append(f"/v1/models: {type(exc).__name__}: {exc}"[:200])
        rel.error = "; ".join(errors) or None
        return rel
