"""Upgrade activities: candidate tracks, track weights, promotion, warm-up and analysis.

Kubernetes and HAProxy calls are sync (blocking clients, thread pool); warm-up and analysis are
async httpx against the track's replicas and heartbeat as requests complete.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.errors import app_error, refuse_all_zero
from activities.per_region import PerRegion
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import RegionRequest
from drctl.models.analysis import AnalysisRequest, AnalysisResult, TrackRef, judge
from drctl.models.upgrade import (
    PromoteRequest,
    RegionTrackRequest,
    Release,
    TrackDeployRequest,
    TrackWeightsRequest,
    TrackWeightsResult,
    WarmupRequest,
    WarmupResult,
)
from drctl.providers.auth import AuthConfigError, auth_headers
from drctl.providers.base import RegionalTraffic
from drctl.providers.gateway_api import GatewayApiRegionalTraffic
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.replicas import KubernetesReplicaSource
from drctl.providers.track_analysis import Completions, measure_pair, run_requests
from drctl.providers.traffic_factory import regional_traffic
from drctl.providers.workload import Workload

# Per-request deadline of synthetic traffic: a hung replica counts as an error, not a stall.
REQUEST_TIMEOUT_S = 5.0
MAX_REQUESTS_PER_TRACK = 200


class UpgradeActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._traffic: RegionalTraffic | None = None
        self._lock = threading.Lock()
        self._replicas = KubernetesReplicaSource(cfg)
        self._workload = PerRegion(
            lambda region: Workload(cfg, KubernetesPlatform(cfg.region(region), poll_interval_s=0.5))
        )

    def _completions(self) -> Completions:
        """How warm-up and analysis requests are made: the fleet's model, with its bearer token."""
        try:
            headers = auth_headers(self.cfg)
        except AuthConfigError as exc:
            # Without the token every request would read as a failing candidate: stop, name the cause.
            raise ApplicationError(str(exc), type="AuthConfigError", non_retryable=True) from None
        return Completions(self.cfg.workload.model, REQUEST_TIMEOUT_S, headers)

    def _tier(self) -> RegionalTraffic:
        with self._lock:
            if self._traffic is None:
                self._traffic = regional_traffic(self.cfg)
            return self._traffic

    # --- tracks ---------------------------------------------------------------------------------

    @activity.defn(name="deploy_track")
    def deploy_track(self, req: TrackDeployRequest) -> RegionTrackRequest:
        """Create (or update) the canary/green Deployment and Service from the stable ones."""
        activity.logger.info(
            "deploying %s %s with %s x%d", req.region, req.track, req.release.image, req.replicas
        )
        try:
            self._workload(req.region).deploy_track(req.track, req.release, req.replicas)
        except Exception as exc:
            raise app_error(exc, f"deploy {req.track} in {req.region}") from exc
        return RegionTrackRequest(region=req.region, track=req.track)

    @activity.defn(name="remove_track")
    def remove_track(self, req: RegionTrackRequest) -> bool:
        """Delete the track's Deployment and Service, once no route refers to the Service.

        On the Gateway API tier the route loses the track's backendRef first, and the wait for its
        controller to program that comes before the delete: a route left pointing at a deleted
        Service is refused by its controller (ResolvedRefs False) and its share gets 5xx.
        """
        try:
            tier = self._tier()
            if isinstance(tier, GatewayApiRegionalTraffic):
                tier.release_track(req.region, req.track)
            return self._workload(req.region).remove_track(req.track)
        except Exception as exc:
            raise app_error(exc, f"remove {req.track} in {req.region}") from exc

    @activity.defn(name="set_stable_release")
    def set_stable_release(self, req: PromoteRequest) -> Release:
        """Roll the stable Deployment to the release (the workflow then waits for the rollout)."""
        try:
            tracking = self._workload(req.region).set_stable_release(req.release)
        except Exception as exc:
            raise app_error(exc, f"set stable in {req.region} to {req.release.image}") from exc
        return req.release.model_copy(update={"gitops": tracking})

    @activity.defn(name="get_stable_release")
    def get_stable_release(self, req: RegionRequest) -> Release:
        try:
            return self._workload(req.region).stable_release()
        except Exception as exc:
            raise app_error(exc, f"read the stable release in {req.region}") from exc

    # --- track weights --------------------------------------------------------------------------

    @activity.defn(name="set_track_weights")
    def set_track_weights(self, req: TrackWeightsRequest) -> TrackWeightsResult:
        """Apply track weights in one region; return what the tier reports afterwards, and the
        fields written on an object Argo CD tracks (the HTTPRoute), for the workflow to record."""
        refuse_all_zero(req.weights, f"track weight in {req.region}")
        activity.logger.info("track weights in %s: %s", req.region, req.weights)
        try:
            managed = self._tier().set_track_weights(req.region, req.weights) or []
            return TrackWeightsResult(
                region=req.region,
                weights=self._tier().get_track_weights(req.region),
                gitops_managed=managed,
            )
        except Exception as exc:
            raise app_error(exc, f"set track weights in {req.region} to {req.weights}") from exc

    # --- synthetic traffic ----------------------------------------------------------------------

    async def _urls(self, ref: TrackRef) -> list[str]:
        try:
            found = await self._replicas.replicas(self.cfg.region(ref.region))
        except Exception as exc:
            raise app_error(exc, f"list replicas of {ref}") from exc
        return [r.url for r in found if r.track == ref.track]

    @activity.defn(name="warm_up")
    async def warm_up(self, req: WarmupRequest) -> WarmupResult:
        """Synthetic prompts straight to each replica of the track, before it gets any weight."""
        urls = await self._urls(TrackRef(region=req.region, track=req.track))
        if not urls:
            raise ApplicationError(f"{req.region}/{req.track} has no replicas to warm up", type="NoReplicas")
        results = await run_requests(
            urls,
            self._completions(),
            req.prompts * len(urls),
            0.0,
            on_progress=lambda n: activity.heartbeat(n),
        )
        ok = sum(r is not None for r in results)
        return WarmupResult(
            region=req.region, track=req.track, replicas=len(urls), ok=ok, failed=len(results) - ok
        )

    @activity.defn(name="analyze_tracks")
    async def analyze_tracks(self, req: AnalysisRequest) -> AnalysisResult:
        """Candidate vs baseline error rate and TTFT p50/p99, measured in the same window."""
        cand_urls, base_urls = await self._urls(req.candidate), await self._urls(req.baseline)
        per_track = min(MAX_REQUESTS_PER_TRACK, max(req.limits.min_samples, math.ceil(req.window_s * 4)))
        activity.logger.info(
            "analysis %s vs %s: %d requests each over %gs",
            req.candidate,
            req.baseline,
            per_track,
            req.window_s,
        )
        cand, base = await measure_pair(
            (str(req.candidate), cand_urls),
            (str(req.baseline), base_urls),
            self._completions(),
            req.window_s,
            per_track if cand_urls and base_urls else 0,
            on_progress=lambda n: activity.heartbeat(n),
        )
        return judge(cand, base, req.limits)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(UpgradeActivities(cfg))
