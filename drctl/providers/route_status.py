"""What an HTTPRoute's status says about a spec drctl wrote: programmed, or not yet, and why.

Gateway API controllers program routes asynchronously and report per parent Gateway in
`status.parents[].conditions` (gateway-api apis/v1/shared_types.go, RouteParentStatus): `Accepted`
and `ResolvedRefs`, each stamped with the `observedGeneration` it judged. A condition stamped with
an older generation speaks of an older spec, so a write counts only once every parent reports
Accepted True at (or past) the generation written, as `kubectl rollout status` reads a
Deployment's observedGeneration.
"""

from __future__ import annotations

from typing import Any

from drctl.providers.errors import ErrorClass, ProviderError


class RouteNotProgrammed(ProviderError):
    """The route's controller has not accepted what drctl wrote (in time, or at all)."""

    def __init__(self, where: str, generation: int, why: str, retryable: bool) -> None:
        super().__init__(
            ErrorClass(
                kind="RouteNotProgrammed",
                # Not yet accepted may heal (a slow controller): a retry re-reads and waits again.
                # Refused, or traffic sent to a Service that does not exist, will not.
                retryable=retryable,
                message=f"HTTPRoute {where}: generation {generation} not programmed: {why}",
            )
        )


def conditions_text(route: dict[str, Any]) -> str:
    """Every parent's conditions, as `kubectl describe` lists them, for an error message."""
    parts = []
    for parent in (route.get("status") or {}).get("parents") or []:
        name = (parent.get("parentRef") or {}).get("name", "?")
        for c in parent.get("conditions") or []:
            parts.append(
                f"{name}: {c.get('type')}={c.get('status')} ({c.get('reason')}: {c.get('message', '')}; "
                f"observedGeneration {c.get('observedGeneration')})"
            )
    return "; ".join(parts) or "no status.parents (no controller has reported on the route)"


def pending(route: dict[str, Any], generation: int) -> str | None:
    """Why `generation` does not count as programmed yet; None when every parent accepted it."""
    parents = (route.get("status") or {}).get("parents") or []
    if not parents:
        return "no parent Gateway has reported on it"
    for parent in parents:
        name = (parent.get("parentRef") or {}).get("name", "?")
        accepted = next((c for c in parent.get("conditions") or [] if c.get("type") == "Accepted"), None)
        if accepted is None or int(accepted.get("observedGeneration") or 0) < generation:
            seen = accepted.get("observedGeneration") if accepted else None
            return f"parent {name} has not observed it (Accepted at generation {seen})"
        if accepted.get("status") != "True":
            return f"parent {name} did not accept it"
    return None


def refused(route: dict[str, Any], generation: int) -> bool:
    """Whether a parent judged `generation` (or later) and said Accepted False: waiting will not help."""
    for parent in (route.get("status") or {}).get("parents") or []:
        for c in parent.get("conditions") or []:
            if (
                c.get("type") == "Accepted"
                and c.get("status") == "False"
                and int(c.get("observedGeneration") or 0) >= generation
            ):
                return True
    return False


def unresolved(route: dict[str, Any], generation: int) -> bool:
    """Whether a parent reports ResolvedRefs False for `generation` or later."""
    return any(
        c.get("type") == "ResolvedRefs"
        and c.get("status") == "False"
        and int(c.get("observedGeneration") or 0) >= generation
        for parent in (route.get("status") or {}).get("parents") or []
        for c in parent.get("conditions") or []
    )


def routes_to(routes: list[dict[str, Any]], service: str) -> list[str]:
    """The names of the routes that have a backendRef to Service `service` (in their namespace)."""
    return sorted(
        r["metadata"]["name"]
        for r in routes
        if any(
            ref.get("name") == service
            and ref.get("kind", "Service") == "Service"
            and ref.get("group", "") == ""
            for rule in (r.get("spec") or {}).get("rules") or []
            for ref in rule.get("backendRefs") or []
        )
    )
