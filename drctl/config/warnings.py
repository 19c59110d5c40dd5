"""Settings that are valid but defeat an objective: warned about by `drctl config validate`, never fatal."""

from __future__ import annotations

from drctl.config.schema import ConfigProblem, FleetConfig, Route53Global


def detection_s(cfg: FleetConfig) -> float:
    """Worst-case time from a fault to UNHEALTHY: one full interval, then the confirming probes."""
    h = cfg.health
    confirm = h.fast_confirm_interval_s if h.fast_confirm else h.interval_s
    return h.interval_s + (h.failure_threshold - 1) * confirm


def warnings(cfg: FleetConfig) -> list[ConfigProblem]:
    """Every warning for `cfg`, each with its field path."""
    out: list[ConfigProblem] = []
    tier = cfg.traffic.global_tier
    if isinstance(tier, Route53Global):
        rto = cfg.objectives.rto_target_s
        detect = detection_s(cfg)
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
