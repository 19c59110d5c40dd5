"""The environment `chaos run` gets: the basics a process needs, and only names the fleet config names.

The worker's own environment holds cloud, cluster and Temporal credentials. An experiment may read
the environment (configuration entries of type env), and chaoslib passes the whole process
environment on, so the subprocess starts from nothing rather than from a deny list: a credential
with a name nobody thought of is not in it.
"""

from __future__ import annotations

from collections.abc import Mapping

from drctl.config.schema import FleetConfig

# What a Python process, TLS and the locale need; none of these carries a credential.
BASICS = (
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "COVERAGE_PROCESS_START",
)
# drctl's own actions and probes run inside `chaos run` and reach the cluster like the worker does.
_IN_CLUSTER = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG")


def fleet_named_env(cfg: FleetConfig) -> list[str]:
    """Env names the fleet config itself names for drctl's code: tokens read by probes, Temporal."""
    names = list(cfg.drills.allowed_env)
    if cfg.workload.auth and cfg.workload.auth.token_env:
        names.append(cfg.workload.auth.token_env)
    if cfg.temporal.api_key_env:
        names.append(cfg.temporal.api_key_env)
    if cfg.temporal.codec and cfg.temporal.codec.keys_env:
        names.append(cfg.temporal.codec.keys_env)
    if cfg.drills.fault_injector == "kubernetes":
        names += _IN_CLUSTER
    return names


def chaos_env(cfg: FleetConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The scrubbed environment for the `chaos run` subprocess."""
    keep = {*BASICS, *fleet_named_env(cfg)}
    env = {k: v for k, v in environ.items() if k in keep}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["CHAOSTOOLKIT_NO_VERSION_CHECK"] = "1"
    return env
