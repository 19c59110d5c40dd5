"""The `GitOps-managed` lines every operation's result shows: objects Argo CD also syncs that drctl
changed, and the field. Argo CD's self-heal reverts each unless the Application ignores that field
(docs/gitops.md says what happens next)."""

from __future__ import annotations

from drctl.models.gitops import GitOpsManaged

LABEL = "GitOps-managed"


def gitops_rows(entries: list[GitOpsManaged]) -> list[tuple[str, str]]:
    """One (label, text) row per recorded change, for a result table or a line of output."""
    return [(LABEL, f"{g.region} {g.kind}/{g.name}: {g.field} changed ({g.tracking})") for g in entries]
