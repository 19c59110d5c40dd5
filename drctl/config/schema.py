"""Fleet configuration: one pydantic tree, loaded from YAML.

Every field carries a description and units live in field names. Relative paths in the file are
resolved against the directory that holds the file, so `drctl COMMAND -c config/fleet.yaml` works from
any working directory.

It is one module, over the house limit of about 300 lines, on purpose: it is the schema's
reference, section by section in file order, and `drctl config validate` reports against it.
Self-contained sections (passive signals, the data tier's buckets) live in their own modules.
"""

from __future__ import annotations

import typing
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyAddress,
    ValidationError,
    field_validator,
    model_validator,
)

from drctl.config.capacity import RebalanceLimits, RebalanceMode, SloConfig
from drctl.config.data import BUCKET_NAME, REGION_NAME, DataConfig, RegionName
from drctl.config.passive import PassiveConfig
from drctl.config.quorum import QuorumConfig
from drctl.config.regions import RegionsByName
from drctl.config.rules import all_problems
from drctl.config.safeload import DocumentError, Limits, load_yaml, read_bounded
from drctl.config.secret_paths import check_secret_dir, config_dir, inside, secret_roots
from drctl.config.strict import (
    DNS_LABEL,
    LABEL_VALUE,
    AwsRegion,
    EnvVarName,
    HostName,
    HostPort,
    HttpUrl,
    KubeNamespace,
    KubeObjectName,
    PrintableText,
    ScalarProblems,
    StrictModel,
    TaskQueue,
    TemporalNamespace,
    Token,
    matches,
)

TRACKS = ("stable", "canary", "blue", "green")
# Where Kubernetes and Docker mount secrets, and drctl's own config directory.
MAX_DRILL_RPS = 100  # drills.load_rps; the drill's workflow input holds it to the same range
DEFAULT_SECRET_DIRS = ("/var/run/secrets", "/run/secrets", "/etc/drctl", "/etc/drctl-kube")
# A fleet config is pages of YAML: 16 MiB and a million values hold 20,000 regions several times.
CONFIG_LIMITS = Limits(max_bytes=16 << 20, max_depth=24, max_nodes=1_000_000, max_scalar=65_536)


_Model = StrictModel
# HAProxy's own rule for proxy names: letters, digits, '-', '_', '.', ':'.
HAProxyName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]
SecretDir = Annotated[str, AfterValidator(check_secret_dir)]


# --- Kubernetes --------------------------------------------------------------------------------


class KubeConfig(_Model):
    api_url: HttpUrl | None = Field(
        None, description="Kubernetes API URL used without a kubeconfig (the dev stack's emulated cluster)."
    )
    context: Token | None = Field(
        None, description="kubeconfig context for this region's cluster (exec auth, e.g. EKS, works)."
    )
    kubeconfig_path: str | None = Field(None, description="kubeconfig file; default is the client's default.")
    in_cluster: bool = Field(
        False, description="Use the pod's service account: the region whose cluster the worker runs in."
    )
    namespace: KubeNamespace = Field("inference", description="Namespace that holds the inference workload.")

    @model_validator(mode="after")
    def _one_source(self) -> KubeConfig:
        # None of them is allowed: like kubectl, the client then uses the pod's service account
        # when it runs in a pod, else the kubeconfig's current context.
        sources = [k for k in ("api_url", "context", "in_cluster") if getattr(self, k)]
        if len(sources) > 1:
            raise ValueError(f"set only one of api_url, context, in_cluster (got {', '.join(sources)})")
        return self


# --- Regions -----------------------------------------------------------------------------------


class RegionConfig(_Model):
    name: str = Field(..., description="Region name, e.g. us-west-1.", pattern=REGION_NAME)
    weight: int = Field(..., ge=0, le=256, description="Configured global traffic weight (relative).")
    replicas: int = Field(2, ge=0, le=64, description="Replicas of the stable Deployment at steady state.")
    max_replicas: int = Field(
        8, ge=1, le=256, description="Upper bound on replicas when pre-scaling to absorb failover traffic."
    )
    gateway_url: HttpUrl = Field(..., description="Region gateway base URL, probed for region health.")
    kube: KubeConfig = Field(..., description="How to reach this region's Kubernetes API.")
    task_queue: TaskQueue | None = Field(
        None,
        description="Temporal task queue served by this region's worker; default drctl-<region>.",
    )
    route53_set_identifier: Token | None = Field(
        None, description="SetIdentifier of this region's weighted record; default the region name."
    )
    gateway_runtime_socket: str | None = Field(
        None, description="HAProxy runtime API socket of this region's gateway (regional tier 'haproxy')."
    )
    devstack_admin_url: HttpUrl | None = Field(
        None, description="Dev stack only: the node agent's fault and replica admin API for this region."
    )

    @property
    def queue(self) -> str:
        return self.task_queue or f"drctl-{self.name}"

    @property
    def set_identifier(self) -> str:
        return self.route53_set_identifier or self.name


# --- Workload ----------------------------------------------------------------------------------


class WorkloadAuth(_Model):
    """Where the bearer token of the inference servers (vLLM `--api-key`) is read from.

    Only the names live in the config: activities read the value when they send a request, so the
    token never enters a workflow input, the history or a log line.
    """

    token_env: EnvVarName | None = Field(
        None, description="Environment variable of the worker that holds the API key."
    )
    token_file: str | None = Field(
        None, description="File holding the API key (e.g. a mounted Secret); relative to the config file."
    )

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadAuth:
        return self._exactly_one("token_env", "token_file")


class WorkloadConfig(_Model):
    app: str = Field("llm", description="App label and Deployment name prefix: <app>-<track>.")
    model: Token = Field("fleetsim-tiny", description="Served model name, as /v1/models reports it.")
    image: Token = Field("vllm/vllm-openai:v0.33.0", description="Stable image of the inference server.")
    container_port: int = Field(8000, ge=1, le=65535, description="Container port of the inference server.")
    model_load_s: float = Field(
        0.0,
        ge=0,
        le=3600,
        description="How long a replica takes to load its model before it serves (vLLM keeps its port closed "
        "meanwhile), seconds; a rollout wait allows the Deployment's progressDeadlineSeconds plus this.",
    )
    max_rps_per_replica: float | None = Field(
        None,
        gt=0,
        description="Requests per second one replica serves within its latency target; with peak_rps, "
        "sizes a failover target (otherwise the source's configured replicas move with its share).",
    )
    peak_rps: float | None = Field(
        None,
        gt=0,
        description="Expected peak requests per second of the whole fleet, through the global endpoint.",
    )
    max_concurrency_per_replica: int | None = Field(
        None,
        gt=0,
        le=100_000,
        description="Requests one replica runs at once within its latency target (vLLM's max_num_seqs); "
        "unset, the capacity model learns it from the servers' own metrics.",
    )

    @model_validator(mode="after")
    def _capacity_pair(self) -> WorkloadConfig:
        if (self.max_rps_per_replica is None) != (self.peak_rps is None):
            raise ValueError("set max_rps_per_replica and peak_rps together (failover sizing needs both)")
        return self

    auth: WorkloadAuth | None = Field(
        None, description="Bearer token for the inference servers' /v1 API; none means anonymous requests."
    )

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str | None:
        # A label value (app=<app>) and the prefix of Deployment and Service names (<app>-canary).
        if len(v) > 56:
            raise ValueError("at most 56 characters: <app>-<track> must stay a 63-character name")
        matches(LABEL_VALUE, "Kubernetes label value", v)
        return matches(DNS_LABEL, "Kubernetes name (DNS-1123 label)", v)

    def deployment_name(self, track: str) -> str:
        return f"{self.app}-{track}"


# --- Health ------------------------------------------------------------------------------------


class HealthConfig(_Model):
    interval_s: float = Field(10.0, gt=0, description="Seconds between health checks of every region.")
    probe_timeout_s: float = Field(2.0, gt=0, description="Timeout of one probe request, seconds.")
    failure_threshold: int = Field(
        3, ge=1, le=20, description="Consecutive failed checks that mark a region UNHEALTHY."
    )
    recovery_threshold: int = Field(
        3,
        ge=1,
        le=50,
        description="Consecutive good checks that return a RECOVERING region to HEALTHY (hysteresis).",
    )
    fast_confirm_interval_s: float = Field(
        1.0, gt=0, description="Seconds between re-probes after a first failure (fast confirm)."
    )
    fast_confirm: bool = Field(
        True, description="Re-probe quickly after a first failure instead of waiting interval_s."
    )
    ttft_degraded_ms: float = Field(
        2000.0, gt=0, description="TTFT above which a probe counts as degraded, ms."
    )
    error_rate_degraded: float = Field(
        0.25, gt=0, le=1, description="Fraction of failing replica probes above which a region is DEGRADED."
    )
    probe_source_address: IPvAnyAddress | None = Field(
        None,
        description="Local address the probe's connections leave from (a multi-homed worker picks the path "
        "it probes by); default: the kernel's choice.",
    )
    probe_concurrency: int = Field(
        64, ge=1, le=1024, description="Targets probed at once (each runs its 2 to 6 requests itself)."
    )
    completion_sample: float = Field(
        0.1,
        gt=0,
        le=1,
        description="Fraction of a region's replicas sent a 1-token completion per round, rotating so every "
        "replica gets one within ceil(1/fraction) rounds; the gateway gets completions every round.",
    )
    fail_on_degraded: bool = Field(True, description="Count a DEGRADED region as a failed check.")
    watcher: bool = Field(
        True,
        description="Run the monitor's probe (and passive) loop in one long-lived heartbeating activity that "
        "returns only on a region state change or a checkpoint: a few history events an hour instead of ~12 a round.",
    )
    watcher_checkpoint_s: float = Field(
        600.0,
        ge=10,
        le=3600,
        description="With watcher: the longest the watcher runs before returning, s.",
    )
    passive: PassiveConfig = Field(
        default_factory=PassiveConfig,
        description="Passive signals (gateway counters, vLLM /metrics, or Prometheus) read every interval_s; "
        "a breach makes a region SUSPECT for the active probe to confirm.",
    )
    quorum: QuorumConfig = Field(
        default_factory=QuorumConfig,
        description="Vantage points that must agree a region is down before an automatic failover.",
    )

    @model_validator(mode="after")
    def _interval_longer_than_timeout(self) -> HealthConfig:
        if self.interval_s <= self.probe_timeout_s:
            raise ValueError(
                f"interval_s ({self.interval_s}) must be longer than probe_timeout_s ({self.probe_timeout_s})"
            )
        return self


class ObjectivesConfig(_Model):
    rto_target_s: float = Field(
        30.0, gt=0, description="Recovery time objective: fault to traffic fully served, s."
    )
    rpo_target_s: float = Field(5.0, ge=0, description="Recovery point objective, seconds.")
    slo: SloConfig = Field(
        default_factory=SloConfig,
        description="The service objective: a failover or rebalance is done when the target meets it.",
    )


class FailoverConfig(_Model):
    policy: Literal["automatic", "manual"] = Field(
        "automatic", description="Fail over automatically on UNHEALTHY."
    )
    require_approval: bool = Field(False, description="Wait for `drctl ops approve` before shifting traffic.")
    audit_bucket: str | None = Field(
        None,
        description="S3 bucket (aws section's account or endpoint) that keeps the audit record of every "
        "break-glass failover (`drctl failover --break-glass`), under `breakglass/<fleet>/<UTC time>.json`; "
        "default: drills.history_bucket, the bucket drctl already keeps the fleet's records in. Give it "
        "a bucket replicated out of every region, so the record outlives the region lost.",
        pattern=BUCKET_NAME,
    )
    approval_timeout_s: float = Field(900.0, gt=0, description="How long an approval gate waits, seconds.")
    approval_reminder_s: float | None = Field(
        None,
        gt=0,
        description="Remind the webhooks this long before an approval gate times out, seconds; "
        "default: a fifth of approval_timeout_s (at 80 %).",
    )
    verify_requests: int = Field(
        20, ge=1, le=1000, description="Requests through the global endpoint to verify a shift."
    )
    verify_timeout_s: float = Field(
        15.0, gt=0, description="Deadline for the post-shift verification, seconds."
    )
    rollout_timeout_s: float = Field(
        120.0,
        gt=0,
        description="Least time a rollout wait (pre-scale, upgrade, migration) allows, seconds; it allows the "
        "Deployment's progressDeadlineSeconds plus workload.model_load_s when that is longer, and the "
        "controller's ProgressDeadlineExceeded ends it sooner.",
    )
    rebalance: RebalanceMode = Field(
        "automatic",
        description="A region short of capacity or breaching the objective sheds only its excess share to the "
        "others, in proportion to their headroom: automatic moves it, advise only records and notifies, off "
        "leaves the share (a region that is down still fails over).",
    )
    rebalance_limits: RebalanceLimits = Field(
        default_factory=RebalanceLimits, description="Steps, hysteresis and windows of a rebalance."
    )

    @model_validator(mode="after")
    def _reminder_before_timeout(self) -> FailoverConfig:
        if self.approval_reminder_s is not None and self.approval_reminder_s >= self.approval_timeout_s:
            raise ValueError(
                f"approval_reminder_s ({self.approval_reminder_s:g}) must be less than "
                f"approval_timeout_s ({self.approval_timeout_s:g}): it is how long before the timeout to remind"
            )
        return self


class FailbackConfig(_Model):
    stabilization_window_s: float = Field(
        30.0, ge=0, description="Source must stay healthy this long first, s."
    )
    steps: int = Field(3, ge=1, le=20, description="Number of weight steps back to the configured weights.")
    step_interval_s: float = Field(10.0, ge=0, description="Pause and analysis time per step, seconds.")


# --- Traffic tiers -----------------------------------------------------------------------------


class HAProxyGlobal(_Model):
    kind: Literal["haproxy"] = Field(..., description="Global tier provider kind.")
    runtime_socket: str = Field(..., description="HAProxy runtime API unix socket of the global frontend.")
    backend: HAProxyName = Field(
        "global", description="Backend whose servers are the region gateways (named by region)."
    )
    fast_path: bool = Field(
        True,
        description="Data-plane fast path (on by default): the global tier retries a request whose connect failed, "
        "whose response was empty, or that got a 503, once on another region (HAProxy `retry-on conn-failure "
        "empty-response 503`, `option redispatch 1`), so a hard-down region costs users about no errors while "
        "drctl moves traffic and capacity, or while drctl, Temporal or the workers are down with it. Only "
        "requests that fit in one HAProxy buffer (tune.bufsize) are retried, and a generation cut off by an "
        "empty response runs again on the other region. `drctl dev up` renders it; a production global "
        "HAProxy needs the same lines (deploy/compose/haproxy-global.cfg). Set false to measure drctl alone.",
    )
    health_checks: bool = Field(
        True,
        description="Check each region gateway's inference health endpoint (GET /drctl/ready: 200 only while a "
        "weighted track has a ready replica) from the global backend, so a region that fails check_fall checks "
        "in a row leaves the rotation within check_interval_s x check_fall, with no drctl, Temporal or worker "
        "acting (docs/failover.md, 'Data-plane fast path'). drctl's weights still decide while it runs. Set "
        "false to measure drctl alone.",
    )
    check_interval_s: float = Field(
        2.0,
        gt=0,
        le=60,
        description="Seconds between two health checks of a region gateway (HAProxy `inter`).",
    )
    check_fall: int = Field(
        3, ge=1, le=100, description="Consecutive failed checks before a region leaves the rotation (`fall`)."
    )
    check_rise: int = Field(
        2,
        ge=1,
        le=100,
        description="Consecutive passed checks before a region rejoins the rotation (`rise`).",
    )

    @property
    def detect_s(self) -> float:
        """Interval x fall: how long the global tier takes to take a dead region out by itself."""
        return self.check_interval_s * self.check_fall


class Route53HealthCheck(_Model):
    """The health check drctl creates and owns for each region record (drctl/providers/route53_health.py)."""

    enabled: bool = Field(
        True,
        description="Create one Route 53 health check per region record and attach it on every UPSERT, so "
        "DNS leaves out a dead region even while drctl or the Route 53 API cannot act (data-plane "
        "recovery). drctl's weights still decide while it runs.",
    )
    protocol: Literal["HTTP", "HTTPS"] = Field("HTTPS", description="How Route 53 checks the region gateway.")
    port: int | None = Field(
        None, ge=1, le=65535, description="Port checked; default 443 for HTTPS and 80 for HTTP."
    )
    path: str = Field(
        "/health",
        description="Path on the region gateway that answers 2xx only while a ready replica serves "
        "(docs/production.md, 'Data-plane health checks').",
        pattern=r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,254}$",
    )
    request_interval_s: Literal[10, 30] = Field(
        10, description="Seconds between checks from each Route 53 checker (10 is the fast interval)."
    )
    failure_threshold: int = Field(
        3, ge=1, le=10, description="Consecutive failed checks before Route 53 counts the region unhealthy."
    )
    targets: dict[str, Token] = Field(
        default_factory=dict,
        description="Host name or IP address checked per region; default the region's record value "
        "(traffic.global.targets).",
    )

    @property
    def detect_s(self) -> int:
        """Checks x interval: how long Route 53's checkers take to see a dead region (before DNS TTL)."""
        return self.request_interval_s * self.failure_threshold


class Route53Global(_Model):
    kind: Literal["route53"] = Field(..., description="Global tier provider kind.")
    hosted_zone_id: str = Field(
        ...,
        description="Route 53 hosted zone ID, bare or as /hostedzone/<id> (or the zone name, looked up).",
        pattern=r"^(/hostedzone/)?[A-Za-z0-9][A-Za-z0-9.-]{0,253}\.?$",
    )
    record_name: str = Field(
        ...,
        description="Weighted record name, e.g. api.example.com.",
        max_length=254,
        pattern=r"^(\*\.)?[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})?)*\.?$",
    )
    record_type: Literal["A", "AAAA", "CNAME"] = Field("CNAME", description="Record type.")
    ttl_s: int = Field(
        30,
        ge=0,
        le=86400,
        description="Record TTL, seconds. Resolvers keep the old answer this long after a change, so the "
        "failover's verification window is failover.verify_timeout_s + ttl_s.",
    )
    propagation_timeout_s: float = Field(
        180.0,
        gt=0,
        le=3600,
        description="How long an operation waits for a weight change to be INSYNC before it records the "
        "change as still pending and goes on, seconds (AWS: generally within 60 s).",
    )
    targets: dict[str, Token] = Field(
        ..., description="Record value per region: the region's load balancer name or address."
    )
    health_check: Route53HealthCheck = Field(
        default_factory=Route53HealthCheck,
        description="The Route 53 health check drctl owns per region record.",
    )


class HAProxyRegional(_Model):
    kind: Literal["haproxy"] = Field(..., description="Regional tier provider kind.")
    backend: HAProxyName = Field(
        "region", description="Backend in each region gateway whose servers are the tracks."
    )


class GatewayApiRegional(_Model):
    kind: Literal["gateway-api"] = Field(..., description="Regional tier provider kind.")
    httproute: KubeObjectName = Field(
        "llm", description="HTTPRoute whose backendRefs are the track Services."
    )


class TrafficConfig(_Model):
    global_endpoint: HttpUrl = Field(
        ..., description="The one URL clients use; failover is verified through it."
    )
    region_header: str = Field(
        "x-drctl-region",
        description="Response header the regional gateways set to their region name; verification reads it.",
        pattern=r"^[A-Za-z0-9-]{1,64}$",
    )
    global_tier: Annotated[HAProxyGlobal | Route53Global, Field(discriminator="kind")] = Field(
        ..., alias="global", description="Who sets region weights."
    )
    regional_tier: Annotated[HAProxyRegional | GatewayApiRegional, Field(discriminator="kind")] = Field(
        ..., alias="regional", description="Who sets track weights inside a region."
    )
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# --- Infrastructure ----------------------------------------------------------------------------


class TemporalTLS(_Model):
    client_cert_path: str | None = Field(
        None, description="mTLS client certificate (PEM); omit with an API key."
    )
    client_key_path: str | None = Field(None, description="mTLS client key (PEM); set with client_cert_path.")
    server_root_ca_cert_path: str | None = Field(None, description="CA bundle for the server certificate.")
    domain: HostName | None = Field(None, description="TLS server name override (a DNS name or IP address).")

    @model_validator(mode="after")
    def _cert_and_key(self) -> TemporalTLS:
        if bool(self.client_cert_path) != bool(self.client_key_path):
            raise ValueError("set client_cert_path and client_key_path together (mTLS), or neither (API key)")
        return self


class CodecConfig(_Model):
    keys_env: EnvVarName | None = Field(
        None, description="Env var with `id=base64key` entries, first one current."
    )
    keys_file: str | None = Field(None, description="File with `id=base64key` lines, first one current.")
    allow_plaintext: bool = Field(
        False,
        description="Migration window only: accept payloads written before the codec (or before its "
        "namespace binding). Off, a workflow started without the keys fails with a clear error.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> CodecConfig:
        return self._exactly_one("keys_env", "keys_file")


class TemporalConfig(_Model):
    address: HostPort = Field(
        "127.0.0.1:7233",
        description="Temporal frontend host:port, as TEMPORAL_ADDRESS takes it (no scheme, credentials or path).",
    )
    namespace: TemporalNamespace = Field("default", description="Temporal namespace.")
    task_queue: TaskQueue = Field(
        "drctl", description="Task queue for workflows and region-neutral activities."
    )
    ui_url: HttpUrl = Field("http://127.0.0.1:8233", description="Temporal UI base URL, for links.")
    tls: TemporalTLS | None = Field(None, description="mTLS settings (Temporal Cloud or a TLS cluster).")
    api_key_env: EnvVarName | None = Field(
        None, description="Environment variable holding a Temporal Cloud API key."
    )
    codec: CodecConfig | None = Field(
        None, description="AES-GCM payload encryption for the worker and the CLI (docs: drctl codec-server)."
    )
    identity: PrintableText | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Who the CLI acts as, recorded on every operation (e.g. the API key's principal); "
        "DRCTL_IDENTITY overrides it; default: user@host.",
    )


class AwsConfig(_Model):
    region: AwsRegion = Field("us-east-1", description="AWS region for S3 and the Route 53 client.")
    endpoint_url: HttpUrl | None = Field(
        None, description="AWS endpoint override (moto server in the dev stack)."
    )


class VeleroConfig(_Model):
    kind: Literal["velero"] = Field("velero", description="Backup provider kind.")
    namespace: KubeNamespace = Field(
        "velero", description="Namespace of Velero's Backup and Restore objects."
    )
    storage_location: KubeObjectName = Field("default", description="BackupStorageLocation name.")
    bucket: str = Field(
        "drctl-backups", description="Object store bucket behind the storage location.", pattern=BUCKET_NAME
    )
    ttl: str = Field(
        "720h0m0s",
        description="Backup TTL, in Velero's duration format.",
        pattern=r"^([0-9]{1,6}[hms]){1,3}$",
    )
    timeout_s: float = Field(
        300.0, gt=0, description="Deadline for a Backup or Restore to reach a terminal phase."
    )
    partially_failed_ok: bool = Field(False, description="Treat PartiallyFailed as success.")
    sync_timeout_s: float = Field(
        120.0,
        gt=0,
        le=86400,
        description="How long a restore waits for the target cluster's Velero to list a backup taken in "
        "another cluster (Velero imports those through backup sync, every --backup-sync-period): "
        "2 x the period the clusters run; the default suits Velero's default of 1 min, s.",
    )
    restore_namespaces: list[KubeNamespace] = Field(
        default_factory=list,
        max_length=256,
        description="Namespaces a migration or restore may write into (besides each region's own "
        "kube.namespace); drctl refuses a restore into any other.",
    )

    max_age_s: float = Field(
        93600.0,
        gt=0,
        description="Newest successful backup may be this old before the alert fires: "
        "the schedule's period plus slack, s.",
    )


class UpgradeConfig(_Model):
    steps_percent: list[int] = Field([5, 25, 50, 100], description="Canary weight steps, percent.")
    step_pause_s: float = Field(10.0, ge=0, description="Analysis window per step, seconds.")
    max_error_rate: float = Field(
        0.05, ge=0, le=1, description="Canary error rate above which analysis fails."
    )
    max_ttft_p99_ratio: float = Field(
        2.0, gt=1, description="Canary TTFT p99 / stable TTFT p99 above which it fails."
    )
    max_ttft_p50_ratio: float = Field(
        1.5, gt=1, description="Canary TTFT p50 / stable TTFT p50 above which it fails."
    )
    min_ttft_increase_ms: float = Field(
        50.0,
        ge=0,
        description="A TTFT ratio over its limit fails only when the canary is also this much slower, ms: "
        "the ratio of two small figures (30 ms vs 65 ms) is scheduling noise, not a regression.",
    )
    min_samples: int = Field(
        20, ge=1, description="Fewer samples than this per track make a step inconclusive."
    )
    scale_down_delay_s: float = Field(
        30.0, ge=0, description="Blue-green: keep blue this long after the switch."
    )
    approval_between_regions: bool = Field(False, description="Wait for approval between region waves.")

    @field_validator("steps_percent")
    @classmethod
    def _steps(cls, v: list[int]) -> list[int]:
        if not v or any(s <= 0 or s > 100 for s in v) or v != sorted(set(v)) or v[-1] != 100:
            raise ValueError("steps must be increasing percentages in 1..100 ending at 100")
        return v


class DrillConfig(_Model):
    allowed_targets: list[RegionName] = Field(
        default_factory=list, description="Regions a drill may inject faults into; empty allows none."
    )
    history_bucket: str = Field(
        "drctl-drills", description="S3 bucket for drill reports.", pattern=BUCKET_NAME
    )
    fault_injector: Literal["devstack", "kubernetes"] = Field(
        "kubernetes",
        description="How experiments inject faults: the dev stack's node agent, or the Kubernetes API.",
    )
    load_rps: float = Field(
        5.0, gt=0, le=MAX_DRILL_RPS, description="Bounded load through the global endpoint during a drill."
    )
    timeout_s: float = Field(300.0, gt=0, description="Deadline for one drill run, seconds.")
    allowed_env: list[EnvVarName] = Field(
        default_factory=list,
        max_length=64,
        description="Worker environment variables an experiment's configuration may read (type env); "
        "nothing else of the worker's environment reaches `chaos run`.",
    )


class WorkerConfig(_Model):
    # The default fits Kubernetes' default terminationGracePeriodSeconds (30 s) with time to exit.
    graceful_shutdown_s: float = Field(
        25.0,
        ge=0,
        le=3600,
        description="On SIGTERM, how long running activities may take to finish before they are cancelled, s.",
    )
    http_port: int = Field(
        9464,
        ge=0,
        le=65535,
        description="Port of the worker's HTTP endpoint (/metrics, /healthz, /readyz); 0 disables it.",
    )
    http_host: HostName = Field(
        "0.0.0.0", description="Address the worker's HTTP endpoint binds to: a host name or IP address."
    )
    namespace: KubeNamespace = Field(
        "drctl",
        description="Kubernetes namespace the drctl worker runs in (deploy/kubernetes: drctl); no restore "
        "may write into it.",
    )
    sdk_metrics: bool = Field(
        True,
        description="Include the Temporal SDK's own metrics (temporal_*) in /metrics.",
    )


# --- Notifications -----------------------------------------------------------------------------

NotifyEvent = Literal[
    "failover.started",
    "failover.succeeded",
    "failover.failed",
    "alert.raised",
    "alert.resolved",
    "drill.verdict",
    "upgrade.rolled_back",
    "approval.pending",
    "rebalance.advised",
    "rebalance.applied",
    "tier.changed",
]
NOTIFY_EVENTS: tuple[NotifyEvent, ...] = typing.get_args(NotifyEvent)
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"


class WebhookConfig(_Model):
    name: str = Field(
        ..., pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$", description="Webhook name, shown in history."
    )
    format: Literal["json", "slack", "pagerduty"] = Field(
        "json", description="Payload: generic JSON, a Slack incoming webhook, or PagerDuty Events API v2."
    )
    url: HttpUrl | None = Field(
        None, description="Endpoint URL (default for pagerduty: the Events API v2 URL)."
    )
    url_env: EnvVarName | None = Field(
        None, description="Environment variable holding the URL instead (a Slack webhook URL is a secret)."
    )
    routing_key_env: EnvVarName | None = Field(
        None, description="pagerduty: env var holding the integration's routing key."
    )
    routing_key_file: str | None = Field(None, description="pagerduty: file holding the routing key.")
    events: list[NotifyEvent] = Field(
        default_factory=lambda: list(NOTIFY_EVENTS), description="Events sent to this webhook; default all."
    )
    timeout_s: float = Field(5.0, gt=0, le=60, description="Timeout of one delivery attempt, seconds.")
    retry_for_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="Retry a failed delivery with backoff for at most this long, seconds.",
    )

    @model_validator(mode="after")
    def _sources(self) -> WebhookConfig:
        if self.url and self.url_env:
            raise ValueError("set url or url_env, not both")
        if self.format != "pagerduty" and not (self.url or self.url_env):
            raise ValueError("set url or url_env")
        keys = [k for k in (self.routing_key_env, self.routing_key_file) if k]
        if self.format == "pagerduty" and len(keys) != 1:
            raise ValueError("pagerduty needs exactly one of routing_key_env or routing_key_file")
        if self.format != "pagerduty" and keys:
            raise ValueError("routing_key_env/routing_key_file apply to format pagerduty only")
        return self


class NotificationsConfig(_Model):
    webhooks: list[WebhookConfig] = Field(
        default_factory=list, max_length=100_000, description="Where operation events are sent."
    )

    @field_validator("webhooks")
    @classmethod
    def _unique(cls, v: list[WebhookConfig]) -> list[WebhookConfig]:
        # A Counter, not names.count(): 40,000 webhooks took 46 s to judge with a scan per name.
        dupes = sorted(n for n, c in Counter(w.name for w in v).items() if c > 1)
        if dupes:
            raise ValueError(f"duplicate webhook names: {', '.join(dupes)}")
        return v

    def webhook(self, name: str) -> WebhookConfig:
        for w in self.webhooks:
            if w.name == name:
                return w
        raise KeyError(f"no webhook named {name!r} in notifications.webhooks")


class DevStackConfig(_Model):
    state_dir: str = Field(
        ".drctl/dev", description="Where the dev stack keeps PIDs, logs, SQLite and sockets."
    )
    stats_port: int = Field(8404, ge=1, le=65535, description="HAProxy stats page port.")
    prometheus_port: int = Field(9090, ge=1, le=65535, description="Port of the dev stack's Prometheus.")
    scrape_interval_s: float = Field(
        2.0, gt=0, le=60, description="How often the dev stack's Prometheus scrapes, s."
    )
    worker_http_port: int = Field(
        9464,
        ge=1,
        le=65535,
        description="HTTP port of the first dev-stack worker; each further region's worker takes the next one.",
    )
    model_load_s: float = Field(
        2.0,
        ge=0,
        le=3600,
        description="How long each dev-stack replica (fleetsim) loads its model with its port closed, as vLLM "
        "does, seconds; a container's FLEETSIM_LOAD_S overrides it. Real loads take minutes: a few "
        "seconds keep the suite quick while every start still passes through not-ready.",
    )
    deployment_sync_delay_s: float = Field(
        0.3,
        ge=0,
        le=60,
        description="How long the emulated Deployment controller takes to observe a new spec (status."
        "observedGeneration lags metadata.generation meanwhile), seconds.",
    )
    route_sync_delay_s: float = Field(
        0.3,
        ge=0,
        le=60,
        description="How long the emulated Gateway API controller takes to program an HTTPRoute change "
        "and report it in status.parents, seconds.",
    )
    velero_backup_sync_s: float = Field(
        2.0,
        gt=0,
        le=3600,
        description="How often each cluster's Velero stand-in imports backups taken by other clusters "
        "from the bucket (Velero's --backup-sync-period, 1 min upstream); until then a restore of such "
        "a backup ends FailedValidation, seconds.",
    )


class FleetConfig(_Model, RegionsByName[RegionConfig]):
    name: str = Field(
        ...,
        description="Fleet name; workflow IDs and search attributes carry it.",
        pattern=r"^[a-z0-9][a-z0-9-]{0,40}$",
    )
    regions: list[RegionConfig] = Field(
        ..., min_length=1, max_length=50_000, description="Regions of the fleet, active-active."
    )
    secret_dirs: list[SecretDir] = Field(
        default_factory=lambda: list(DEFAULT_SECRET_DIRS),
        max_length=32,
        description="Directories secret files (token_file, routing_key_file, codec keys_file, TLS key, "
        "kubeconfig_path) may live in, besides the config file's own real directory: absolute, and not / or "
        "a system directory (/etc, /usr, /var, /home, ...; nothing under /proc, /sys or /dev).",
    )
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig, description="The inference workload.")
    health: HealthConfig = Field(default_factory=HealthConfig, description="Health monitoring.")
    objectives: ObjectivesConfig = Field(default_factory=ObjectivesConfig, description="RTO and RPO targets.")
    failover: FailoverConfig = Field(default_factory=FailoverConfig, description="Failover policy.")
    failback: FailbackConfig = Field(default_factory=FailbackConfig, description="Failback policy.")
    traffic: TrafficConfig = Field(..., description="Traffic tiers.")
    temporal: TemporalConfig = Field(default_factory=TemporalConfig, description="Temporal connection.")
    aws: AwsConfig = Field(default_factory=AwsConfig, description="AWS client settings.")
    backup: VeleroConfig = Field(default_factory=VeleroConfig, description="Backup provider.")
    upgrade: UpgradeConfig = Field(default_factory=UpgradeConfig, description="Upgrade defaults.")
    drills: DrillConfig = Field(default_factory=DrillConfig, description="Chaos drills.")
    data: DataConfig = Field(
        default_factory=DataConfig, description="Model artifact and state bucket replication."
    )
    worker: WorkerConfig = Field(default_factory=WorkerConfig, description="The drctl worker process.")
    notifications: NotificationsConfig = Field(
        default_factory=NotificationsConfig,
        description="Webhooks that hear about failovers, alerts, drills, upgrades.",
    )
    devstack: DevStackConfig | None = Field(None, description="Embedded dev stack settings (dev only).")
    source_path: str | None = Field(
        None, description="Set by the loader: the file this came from.", exclude=True
    )

    @model_validator(mode="after")
    def _cross_checks(self) -> FleetConfig:
        # Sets and Counters, not list scans: judging 20,000 regions must stay linear.
        names = [r.name for r in self.regions]
        known = set(names)
        dupes = sorted(n for n, c in Counter(names).items() if c > 1)
        if dupes:
            raise ValueError(f"duplicate regions: {', '.join(dupes)}")
        if sum(r.weight for r in self.regions) <= 0:
            raise ValueError("region weights cannot be normalised: they sum to 0")
        g = self.traffic.global_tier
        if isinstance(g, Route53Global):
            over = [f"{r.name}={r.weight}" for r in self.regions if r.weight > 255]
            if over:
                raise ValueError(f"Route 53 weights are 0..255; too large: {', '.join(over)}")
            missing = [n for n in names if n not in g.targets]
            if missing:
                raise ValueError(f"traffic.global.targets has no record value for: {', '.join(missing)}")
            stray = sorted(set(g.health_check.targets) - set(names))
            if stray:
                raise ValueError(
                    f"traffic.global.health_check.targets names unknown regions: {', '.join(stray)}"
                )
        if isinstance(self.traffic.regional_tier, HAProxyRegional):
            missing = [r.name for r in self.regions if not r.gateway_runtime_socket]
            if missing:
                raise ValueError(
                    f"regional tier 'haproxy' needs gateway_runtime_socket on regions: {', '.join(missing)}"
                )
        unknown = [t for t in self.drills.allowed_targets if t not in known]
        if unknown:
            raise ValueError(f"drills.allowed_targets names unknown regions: {', '.join(unknown)}")
        bad = [f"{path} ({r})" for path, r in self.data.regions_named() if r not in known]
        if bad:
            raise ValueError(f"data names unknown regions: {', '.join(bad)}")
        outside = self._secrets_outside_allowed_dirs()
        if outside:
            raise ValueError(
                f"secret files outside secret_dirs ({', '.join(self.secret_dirs) or 'none'}) and the config's "
                f"directory: {', '.join(outside)}"
            )
        problems = all_problems(self)
        if problems:
            raise ScalarProblems(problems)  # each reported at its own field path
        return self

    def _secret_files(self) -> list[tuple[str, str]]:
        files: list[tuple[str, str | None]] = [
            ("workload.auth.token_file", self.workload.auth.token_file if self.workload.auth else None),
            ("temporal.codec.keys_file", self.temporal.codec.keys_file if self.temporal.codec else None),
            (
                "temporal.tls.client_key_path",
                self.temporal.tls.client_key_path if self.temporal.tls else None,
            ),
        ]
        files += [
            (f"regions[{i}].kube.kubeconfig_path", r.kube.kubeconfig_path) for i, r in enumerate(self.regions)
        ]
        files += [
            (f"notifications.webhooks[{i}].routing_key_file", w.routing_key_file)
            for i, w in enumerate(self.notifications.webhooks)
        ]
        return [(k, v) for k, v in files if v]

    def _secrets_outside_allowed_dirs(self) -> list[str]:
        """Field paths (never the file names' contents) of secret files outside the allowed dirs."""
        files = self._secret_files()
        if not files:
            return []
        roots = secret_roots(self.secret_dirs, self.source_path)
        # load_config made every path absolute against the config's real directory; one still
        # relative (a config parsed from text) is read from the working directory, so judged there.
        return [where for where, path in files if not inside(path, roots)]

    # --- helpers used everywhere ----------------------------------------------------------------

    def region(self, name: str) -> RegionConfig:
        if (r := self.find_region(name)) is None:
            raise UnknownRegionError(name, self.region_names)
        return r

    def normalised_weights(self) -> dict[str, float]:
        total = sum(r.weight for r in self.regions)
        return {r.name: r.weight / total for r in self.regions}

    def restore_namespaces(self, region: str) -> list[str]:
        """Namespaces a restore into `region`'s cluster may write: its workload's, and the allow-list."""
        return sorted({self.region(region).kube.namespace, *self.backup.restore_namespaces})

    def state_dir(self) -> Path:
        return Path(self.devstack.state_dir if self.devstack else ".drctl/dev")


class UnknownRegionError(ValueError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown region {name!r}; known regions: {', '.join(known)}")
        self.name = name
        self.known = known


class ConfigProblem(BaseModel):
    path: str
    message: str
    line: int | None = None


_SHOWN_PROBLEMS = 50


class ConfigError(Exception):
    """A config file that cannot be used. Carries every problem, each with its field path."""

    def __init__(self, file: str, problems: list[ConfigProblem]) -> None:
        self.file = file
        self.problems = problems
        lines = [f"{file}: {len(problems)} problem(s)"]
        for p in problems[:_SHOWN_PROBLEMS]:
            where = f"line {p.line}: " if p.line else ""
            lines.append(f"  - {where}{p.path}: {p.message}")
        if len(problems) > _SHOWN_PROBLEMS:
            lines.append(f"  ... and {len(problems) - _SHOWN_PROBLEMS} more")
        super().__init__("\n".join(lines))


_PATH_KEYS = {
    ("devstack", "state_dir"),
    ("traffic", "global", "runtime_socket"),
    ("temporal", "tls", "client_cert_path"),
    ("temporal", "tls", "client_key_path"),
    ("temporal", "tls", "server_root_ca_cert_path"),
    ("temporal", "codec", "keys_file"),
}


def _resolve_paths(data: dict, base: Path) -> None:
    """Make relative file paths absolute against the config file's real directory (`base`)."""

    def fix(obj: dict, key: str) -> None:
        v = obj.get(key)
        if isinstance(v, str) and v and not Path(v).is_absolute():
            obj[key] = str((base / v).resolve())

    for keys in _PATH_KEYS:
        obj: Any = data
        for k in keys[:-1]:
            obj = obj.get(k) if isinstance(obj, dict) else None
            if obj is None:
                break
        if isinstance(obj, dict):
            fix(obj, keys[-1])
    workload = data.get("workload")
    if isinstance(workload, dict) and isinstance(workload.get("auth"), dict):
        fix(workload["auth"], "token_file")
    notifications = data.get("notifications")
    for hook in (notifications.get("webhooks") or []) if isinstance(notifications, dict) else []:
        if isinstance(hook, dict):
            fix(hook, "routing_key_file")
    regions = data.get("regions")
    for region in regions if isinstance(regions, list) else []:
        if isinstance(region, dict):
            fix(region, "gateway_runtime_socket")
            if isinstance(region.get("kube"), dict):
                fix(region["kube"], "kubeconfig_path")


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("haproxy", "route53", "gateway-api") and out.endswith(("global", "regional")):
            continue  # the discriminator's branch name is noise in a field path
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _raw_checks(data: dict) -> list[ConfigProblem]:
    """Cross-field checks on the raw data, so they are reported even when fields also fail.

    The model validator repeats them for configs built in code; here they must not wait for every
    field to be valid, because a user fixes a file faster when they see all of its problems at once.
    """
    regions = data.get("regions")
    if not isinstance(regions, list):
        return []
    problems: list[ConfigProblem] = []
    seen: set[str] = set()
    for i, r in enumerate(regions):
        name = r.get("name") if isinstance(r, dict) else None
        if isinstance(name, str) and name in seen:
            problems.append(
                ConfigProblem(path=f"regions[{i}].name", message=f"duplicate region {name[:80]!r}")
            )
        elif isinstance(name, str):
            seen.add(name)
    weights = [r.get("weight") for r in regions if isinstance(r, dict)]
    ints = [w for w in weights if isinstance(w, int)]
    if weights and len(ints) == len(weights) and sum(ints) <= 0:
        problems.append(
            ConfigProblem(path="regions[*].weight", message="weights cannot be normalised: they sum to 0")
        )
    return problems


def parse_config(text: str | bytes, file: str = "<string>", base_dir: Path | None = None) -> FleetConfig:
    """Parse and validate a fleet config. Raises ConfigError listing every problem."""
    try:
        data = load_yaml(text, CONFIG_LIMITS, fast=True)
    except DocumentError as exc:
        message = exc.message if exc.message.startswith("YAML syntax") else f"refused: {exc.message}"
        raise ConfigError(file, [ConfigProblem(path="(yaml)", message=message, line=exc.line)]) from None
    if not isinstance(data, dict):
        raise ConfigError(
            file, [ConfigProblem(path="(top level)", message="expected a mapping of fleet settings")]
        )
    if base_dir is not None:
        _resolve_paths(data, base_dir)
    data["source_path"] = file
    try:
        return FleetConfig.model_validate(data)
    except ValidationError as exc:
        problems = _raw_checks(data)
        for err in exc.errors(include_input=False, include_url=False):
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, ScalarProblems):
                problems += [ConfigProblem(path=_loc((*err["loc"], k)), message=m) for k, m in cause.items]
                continue
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            problems.append(ConfigProblem(path=_loc(err["loc"]), message=msg))
        raise ConfigError(file, problems) from None


def load_config(path: str | Path) -> FleetConfig:
    """Load a fleet config file. Raises ConfigError (never a traceback for user mistakes)."""
    p = Path(path)
    try:
        data = read_bounded(p, CONFIG_LIMITS, what="fleet config")
    except OSError as exc:
        raise ConfigError(
            str(p), [ConfigProblem(path="(file)", message=f"cannot read: {exc.strerror}")]
        ) from None
    except DocumentError as exc:
        raise ConfigError(str(p), [ConfigProblem(path="(file)", message=f"refused: {exc.message}")]) from None
    return parse_config(data, file=str(p), base_dir=Path(config_dir(str(p))))
