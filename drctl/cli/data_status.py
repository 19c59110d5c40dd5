"""The data part of `drctl status`: replication lag per bucket and replica against the RPO, release
parity of every region with the primary, and the last backup per region. Measured live by the
workers (FleetRead), each piece independently, so one unreachable bucket, cluster or worker shows as
an error line instead of hiding the rest."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from drctl.config.schema import FleetConfig
from drctl.models.backup import LastBackup
from drctl.models.reads import LagList, ReadResult
from drctl.models.release import Release, compare


def lag_cell(lag_s: float | None, rpo_s: float) -> str:
    if lag_s is None:
        return "unknown"
    return f"{lag_s:.1f} s" + (" > RPO" if lag_s > rpo_s else "")


def _lag_table(reports: list[dict[str, Any]], rpo_s: float) -> list[RenderableType]:
    t = Table(title=f"replication lag (RPO target {rpo_s:g} s)")
    for col in ("bucket", "source", "replica", "lag", "behind", "objects"):
        t.add_column(col, overflow="fold")
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
    out: list[RenderableType] = [t]
    for r in reports:
        if r.get("error"):
            where = f"{r['bucket']}/{r['replica_region']}" if "bucket" in r else "replication lag"
            out.append(Text(f"  {where}: {r['error']}"))
    return out


def releases(cfg: FleetConfig, res: ReadResult, why: str | None) -> list[dict[str, Any]]:
    """Each region's release compared with the primary's (the largest configured weight)."""
    got: dict[str, Release] = {}
    out: list[dict[str, Any]] = []
    for r in cfg.region_names:
        value = res.value(f"release/{r}")
        if value is None:
            err = (res.parts[f"release/{r}"].error if f"release/{r}" in res.parts else why) or "not read"
            got[r] = Release(region=r, error=err)
        else:
            got[r] = Release.model_validate(value)
    primary = max(cfg.regions, key=lambda r: r.weight).name
    for rel in got.values():
        row: dict[str, Any] = {**rel.model_dump(mode="json"), "primary": rel.region == primary}
        if rel.region != primary and got[primary].error is None and rel.error is None:
            row["parity"] = compare(got[primary], rel).model_dump(mode="json")
        out.append(row)
    return out


def last_backups(cfg: FleetConfig, res: ReadResult, why: str | None) -> list[dict[str, Any]]:
    """Age of the newest Completed Velero backup per region: the cluster-state side of the RPO."""
    out = []
    for r in cfg.region_names:
        part = res.parts.get(f"last_backup/{r}")
        if part is not None and part.ok:
            out.append(LastBackup.model_validate(part.value).model_dump(mode="json"))
        else:
            out.append(
                LastBackup(region=r, error=(part.error if part else why) or "not read").model_dump(
                    mode="json"
                )
            )
    return out


def from_parts(cfg: FleetConfig, res: ReadResult, why: str | None = None) -> dict[str, Any]:
    """The data part of `drctl status` from the workers' FleetRead; `why` is what kept the read from running."""
    out: dict[str, Any] = {"releases": releases(cfg, res, why), "last_backup": last_backups(cfg, res, why)}
    if cfg.data.buckets:
        out["rpo_target_s"] = cfg.objectives.rpo_target_s
        lags = res.value("lags")
        if lags is not None:
            out["replication"] = [r.model_dump(mode="json") for r in LagList.model_validate(lags).reports]
        else:
            part = res.parts.get("lags")
            out["replication"] = [{"error": (part.error if part else why) or "not read"}]
    return out


def renderables(data: dict[str, Any]) -> list[RenderableType]:
    out: list[RenderableType] = []
    if data.get("replication"):
        out += _lag_table(data["replication"], data["rpo_target_s"])
    out += _backups(data.get("last_backup") or [])
    rels = data.get("releases") or []
    if not rels:
        return out
    t = Table(title="release parity")
    for col in ("region", "image", "model", "/v1/models", "env", "drift"):
        t.add_column(col, overflow="fold")
    notes = []
    for r in rels:
        if "region" not in r:
            notes.append(f"releases: {r.get('error')}")
            continue
        p = r.get("parity")
        drift = (
            "primary"
            if r.get("primary")
            else "?"
            if p is None
            else ("none" if not p["drift"] else f"{len(p['drift'])} difference(s)")
        )
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
    return [*out, t, *(Text(f"  {line}") for line in notes)]


def _backups(rows: list[dict[str, Any]]) -> list[RenderableType]:
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
    return [Text("last successful backup: " + "; ".join(cells))] if cells else []


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
