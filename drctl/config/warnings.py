"""Settings that are valid but defeat an objective: warned about by `drctl config validate`, never fatal."""

from __future__ import annotations

from drctl.config.schema import ConfigProblem, FleetConfig, Route53Global


def detection_s(cfg: FleetConfig) -> float:
    """Worst-case time from a fault to UNHEALTHY, as the monitor's rounds run (workflows/monitor.py).

    A fault just after a good round waits one full interval_s for the next; that probe may take
    probe_timeout_s to fail; each of the other failure_threshold - 1 confirming rounds starts a
    confirm period after the last one started, or when its probe gave up, whichever is later.
    """
    h = cfg.health
    confirm = h.fast_confirm_interval_s if h.fast_confirm else h.interval_s
    return h.interval_s + h.probe_timeout_s + (h.failure_threshold - 1) * max(confirm, h.probe_timeout_s)


def warnings(cfg: FleetConfig) -> list[ConfigProblem]:
    """Every warning for `cfg`, each with its field path."""
    out: list[ConfigProblem] = []
    rto, detect = cfg.objectives.rto_target_s, detection_s(cfg)
    if rto < detect:
        h = cfg.health
        out.append(
            ConfigProblem(
                path="objectives.rto_target_s",
                message=(
                    f"RTO target {rto:g} s is below the detection time {detect:g} s the health settings allow "
                    f"(health.interval_s {h.interval_s:g} s + probe_timeout_s {h.probe_timeout_s:g} s + "
                    f"{h.failure_threshold - 1} confirming rounds): a region can be down that long before "
                    "failover starts; lower health.interval_s or failure_threshold, or raise rto_target_s"
                ),
            )
        )
    tier = cfg.traffic.global_tier
    if isinstance(tier, Route53Global):
        budget = rto - detect
        # Resolvers keep the old answer for up to one TTL after the shift, so clients keep reaching
        # the failed region that long: the TTL must fit in what detection leaves of the RTO.
        if tier.ttl_s > budget:
            out.append(
                ConfigProblem(
                    path="traffic.global.ttl_s",
                    message=(
                        f"TTL {tier.ttl_s} s exceeds the RTO budget: objectives.rto_target_s {rto:g} s minus "
                        f"detection ~{detect:g} s (health.interval_s + confirming probes) leaves {max(budget, 0):g} s, "
                        f"but resolvers may send clients to the failed region for up to {tier.ttl_s} s after the "
                        "shift; lower ttl_s or raise rto_target_s"
                    ),
                )
            )
    # A drill judges its load until the objective has held for slo.window_s after the failover (plus
    # 2 s): a monitor that fails back sooner moves traffic home inside that tail, and the drill then
    # sees the source serving again and reports traffic never fully served elsewhere.
    tail = cfg.objectives.slo.window_s + 2
    if cfg.failback.stabilization_window_s < tail:
        out.append(
            ConfigProblem(
                path="failback.stabilization_window_s",
                message=(
                    f"{cfg.failback.stabilization_window_s:g} s is shorter than objectives.slo.window_s "
                    f"{cfg.objectives.slo.window_s:g} s + 2 s: the monitor may fail back while a drill still "
                    f"judges its failover, and the drill fails; raise it to at least {tail:g} s"
                ),
            )
        )
    return out
