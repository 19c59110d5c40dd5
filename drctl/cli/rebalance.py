"""How `drctl ops watch rebalance/<fleet>` ends: the rebalance step's result (the monitor starts it)."""

from __future__ import annotations

from rich.table import Table

from drctl.cli import common
from drctl.cli.gitops import gitops_rows
from drctl.models.rebalance import RebalanceResult
from workflows.common import fmt_weights


def render_rebalance(res: RebalanceResult, link: str) -> None:
    t = Table(title=f"rebalance ({res.action}): {res.status}")
    t.add_column("", overflow="fold")
    t.add_column("", overflow="fold")
    t.add_row("weights", f"{fmt_weights(res.weights_before)} → {fmt_weights(res.weights_after)}")
    for what, counts in (("pre-scaled", res.scaled), ("scaled back", res.scaled_back)):
        for region, n in counts.items():
            t.add_row(f"{what} {region}", f"{n} replicas")
    for what, errors in (
        ("pre-scale failed", res.prescale_errors),
        ("scale-back failed", res.scale_back_errors),
    ):
        for region, why in errors.items():
            t.add_row(f"{what} {region}", why)
    for row in gitops_rows(res.gitops_managed):
        t.add_row(*row)
    if res.error:
        t.add_row("error", res.error)
    common.console.print(t)
    common.console.print(f"UI: {link}", markup=False, highlight=False)
