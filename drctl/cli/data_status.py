"""The data part of `drctl status`: replication lag per bucket and replica against the RPO, and
release parity of every region with the primary. Measured live, each piece independently, so one
unreachable bucket or cluster shows as an error line instead of hiding the rest."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.table import Table

from drctl.cli.common import console
from drctl.config.schema import FleetConfig
from drctl.models.release import compare
from drctl.models.rpo import LagReport, replica_pairs


async def measure_all(cfg: FleetConfig) -> list[LagReport]:
    """Lag of every replica, measured now with rclone (what `drctl status` shows)."""
    from drctl.providers.rclone import Rclone

    rc = Rclone(cfg, timeout_s=min(cfg.data.check_timeout_s, 30.0))
    return list(await asyncio.gather(*(asyncio.to_thread(rc.measure_lag, p) for p in replica_pairs(cfg))))


def lag_cell(lag_s: float | None, rpo_s: float) -> str:
    if lag_s is None:
        return "unknown"
    return f"{lag_s:.1f} s" + (" > RPO" if lag_s > rpo_s else "")


def _render_lag(reports: list[dict[str, Any]], rpo_s: float) -> None:
    t = Table(title=f"replication lag (RPO target {rpo_s:g} s)")
    for col in ("bucket", "source", "replica", "lag", "behind", "objects"):
        t.add_column(col, no_wrap=True)
    for r in reports:
        if "bucket" not in r:  # the measurement as a whole failed; its error is printed below
            continue
        t.add_row(
            r["bucket"],
            r["source_region"],
            r["replica_region"],
            lag_cell(r.get("lag_s"), rpo_s),
            str(r.get("missing", 0) + r.get("differ", 0)),
            str(r.get("source_objects", 0)),
        )
    console.print(t)
    for r in reports:
        if r.get("error"):
            where = f"{r['bucket']}/{r['replica_region']}" if "bucket" in r else "replication lag"
            console.print(f"  {where}: {r['error']}", markup=False, highlight=False)


async def releases(cfg: FleetConfig) -> list[dict[str, Any]]:
    """Each region's release compared with the primary's (the largest configured weight)."""
    from drctl.providers.release import ReleaseReader

    reader = ReleaseReader(cfg)
    got = await asyncio.gather(*(asyncio.to_thread(reader.read, r) for r in cfg.region_names))
    by_name = {r.region: r for r in got}
    primary = max(cfg.regions, key=lambda r: r.weight).name
    out = []
    for rel in got:
        row: dict[str, Any] = rel.model_dump(mode="json")
        if rel.region != primary:
            row["parity"] = compare(by_name[primary], rel).model_dump(mode="json")
        out.append(row)
    return out


async def last_backups(cfg: FleetConfig) -> list[dict[str, Any]]:
    """Age of the newest Completed Velero backup per region: the cluster-state side of the RPO."""
    from drctl.providers.velero_schedule import LastBackup, VeleroSchedules

    def last(region: str) -> LastBackup:
        return VeleroSchedules(cfg, region).last_successful()

    got = await asyncio.gather(*(asyncio.to_thread(last, r) for r in cfg.region_names))
    return [b.model_dump(mode="json") for b in got]


async def collect(cfg: FleetConfig) -> dict[str, Any]:
    lags, rels, backups = await asyncio.gather(
        measure_all(cfg), releases(cfg), last_backups(cfg), return_exceptions=True
    )
    out: dict[str, Any] = {
        "releases": rels if isinstance(rels, list) else [{"error": f"{type(rels).__name__}: {rels}"}]
    }
    out["last_backup"] = (
        backups if isinstance(backups, list) else [{"error": f"{type(backups).__name__}: {backups}"}]
    )
    if cfg.data.buckets:
        out["rpo_target_s"] = cfg.objectives.rpo_target_s
        out["replication"] = (
            [r.model_dump(mode="json") for r in lags]
            if isinstance(lags, list)
            else [{"error": f"{type(lags).__name__}: {lags}"}]
        )
    return out


def render(data: dict[str, Any]) -> None:
    if data.get("replication"):
        _render_lag(data["replication"], data["rpo_target_s"])
    _render_backups(data.get("last_backup") or [])
    rels = data.get("releases") or []
    if not rels:
        return
    t = Table(title="release parity")
    for col in ("region", "image", "model", "/v1/models", "env", "drift"):
        t.add_column(col, no_wrap=True)
    notes = []
    for r in rels:
        if "region" not in r:
            notes.append(f"releases: {r.get('error')}")
            continue
        p = r.get("parity")
        drift = "primary" if p is None else ("none" if not p["drift"] else f"{len(p['drift'])} difference(s)")
        t.add_row(
            r["region"],
            r.get("image") or "?",
            r.get("model") or "?",
            ",".join(r["served_models"]) if r.get("served_models") is not None else "?",
            str(len(r.get("env_names") or [])),
            drift,
        )
        notes += [f"{r['region']}: {d}" for d in (p or {}).get("drift", [])]
        if r.get("error"):
            notes.append(f"{r['region']}: {r['error']}")
    console.print(t)
    for line in notes:
        console.print(f"  {line}", markup=False, highlight=False)


def _render_backups(rows: list[dict[str, Any]]) -> None:
    cells = []
    for b in rows:
        if "region" not in b:
            cells.append(f"error {b.get('error')}")
        elif b.get("error"):
            cells.append(f"{b['region']} unknown ({b['error'][:80]})")
        elif b.get("age_s") is None:
            cells.append(f"{b['region']} none")
        else:
            cells.append(f"{b['region']} {_age(b['age_s'])} ago ({b['name']})")
    if cells:
        console.print("last successful backup: " + "; ".join(cells), markup=False, highlight=False)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
