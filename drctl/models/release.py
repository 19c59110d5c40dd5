"""Release parity between regions: what each region's stable track runs, and how two of them differ.

A standby region that drifted (an older image, a different model, a missing env var) turns a
failover into an unplanned release. Parity is compared before a failover and in `drctl status`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Release(BaseModel):
    region: str
    image: str | None = None
    model: str | None = Field(
        None, description="Model the Deployment is configured to serve (args or *MODEL env)."
    )
    env_names: list[str] = Field(
        default_factory=list, description="Env var names only; values may be secrets."
    )
    served_models: list[str] | None = Field(
        None, description="Model ids /v1/models lists; None if unreachable."
    )
    error: str | None = None


class ParityReport(BaseModel):
    source: str
    target: str
    drift: list[str] = Field(default_factory=list, description="Each difference in words.")
    model_differs: bool = Field(
        False, description="The target would serve a different model: refuses a failover."
    )
    errors: list[str] = Field(default_factory=list)


def compare(source: Release, target: Release) -> ParityReport:
    rep = ParityReport(source=source.region, target=target.region)
    for r in (source, target):
        if r.error:
            rep.errors.append(f"{r.region}: {r.error}")
    if source.image != target.image:
        rep.drift.append(f"image {target.image} in {target.region}, {source.image} in {source.region}")
    if source.model != target.model:
        # A model read from one side only (args or env the other side sets differently) is drift to show,
        # not proof of a different model: /v1/models below is the authority when both answer.
        if source.model is not None and target.model is not None:
            rep.model_differs = True
        rep.drift.append(f"model {target.model} in {target.region}, {source.model} in {source.region}")
    missing = sorted(set(source.env_names) - set(target.env_names))
    extra = sorted(set(target.env_names) - set(source.env_names))
    if missing:
        rep.drift.append(f"env missing in {target.region}: {', '.join(missing)}")
    if extra:
        rep.drift.append(f"env only in {target.region}: {', '.join(extra)}")
    if source.served_models is not None and target.served_models is not None:
        lacking = sorted(set(source.served_models) - set(target.served_models))
        if lacking:
            rep.model_differs = True
            rep.drift.append(f"/v1/models of {target.region} lacks {', '.join(lacking)}")
    return rep
