"""Releases keep env entries that come from a Secret (`valueFrom`), through an upgrade and its rollback,
against the emulated API server."""

from __future__ import annotations

from typing import Any

import yaml

from drctl.config.schema import load_config
from drctl.models.upgrade import Release
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.workload import Workload
from tests.support.config import fleet_config_data, short_tmp_dir
from tests.support.kube_cluster import NS, deployment_manifest

HF_TOKEN = {"secretKeyRef": {"name": "hf-token", "key": "token"}}


def _env(p: KubernetesPlatform, name: str) -> list[dict[str, Any]]:
    dep = p.apps.read_namespaced_deployment(name, NS)
    return p.api_client.sanitize_for_serialization(dep)["spec"]["template"]["spec"]["containers"][0]["env"]


def test_rollback_restores_the_secret_reference(platform: KubernetesPlatform) -> None:  # noqa: F811
    path = short_tmp_dir("drctl-wl-") / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_config_data()))
    workload = Workload(load_config(path), platform)
    manifest = deployment_manifest("llm-stable")
    manifest["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "MAX_MODEL_LEN", "value": "4096"},
        {"name": "HF_TOKEN", "valueFrom": HF_TOKEN},
    ]
    platform.delete_deployment("llm-stable")
    platform.apply_deployment(manifest)

    before = workload.stable_release()
    assert before.value_from == {"HF_TOKEN": HF_TOKEN} and before.env == {"MAX_MODEL_LEN": "4096"}
    # The upgrade replaces the env (as an upgrade with new model flags does); the rollback restores it.
    workload.set_stable_release(
        Release(image="vllm/vllm-openai:v0.6.4", env={"MAX_MODEL_LEN": "8192"}, replace_env=True)
    )
    assert {e["name"] for e in _env(platform, "llm-stable")} == {"MAX_MODEL_LEN"}
    workload.set_stable_release(before)
    env = {e["name"]: e for e in _env(platform, "llm-stable")}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": HF_TOKEN}
    assert env["MAX_MODEL_LEN"]["value"] == "4096"
