"""Fleet config for data replication (`data:`): which buckets hold model artifacts and fleet state,
where their replicas live, and how each region's S3-compatible endpoint is reached.

Kept apart from drctl/config/schema.py so the replication settings read as one unit. Credentials are never
in the file: an endpoint names the environment variables that hold them, read by the worker only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from drctl.config.strict import EnvVarName, HttpUrl, StrictModel, Token

BUCKET_NAME = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
REGION_NAME = r"^[a-z0-9][a-z0-9-]{1,40}$"
# A name that must be one of the fleet's regions: patterned too, so an unknown one prints plainly.
RegionName = Annotated[str, Field(pattern=REGION_NAME)]


_Model = StrictModel


class S3Endpoint(_Model):
    endpoint_url: HttpUrl | None = Field(
        None,
        description="S3-compatible endpoint URL; default aws.endpoint_url, or AWS S3 when that is unset.",
    )
    provider: Token = Field(
        "Other", description="rclone's S3 provider name: AWS, Minio, Ceph, Other (any S3-compatible store)."
    )
    s3_region: Token | None = Field(
        None, description="The store's own region; default the fleet region's name."
    )
    access_key_id_env: EnvVarName | None = Field(
        None, description="Environment variable holding the access key id; default boto3's credential chain."
    )
    secret_access_key_env: EnvVarName | None = Field(
        None,
        description="Environment variable holding the secret access key; default boto3's credential chain.",
    )
    session_token_env: EnvVarName | None = Field(
        None,
        description="Environment variable holding the session token of temporary keys named by "
        "access_key_id_env (S3 refuses those keys without it); unset for long-term keys.",
    )


class BucketLocation(_Model):
    region: RegionName = Field(..., description="Fleet region whose endpoint serves this bucket.")
    bucket: str = Field(..., pattern=BUCKET_NAME, description="Bucket name.")


class BucketReplication(_Model):
    name: str = Field(..., pattern=r"^[a-z0-9][a-z0-9-]{0,40}$", description="Short name: models, state, ...")
    source: BucketLocation = Field(..., description="The bucket the fleet writes to.")
    replicas: list[BucketLocation] = Field(..., min_length=1, description="Copies kept in other regions.")
    mode: Literal["copy", "sync"] = Field(
        "copy", description="rclone copy (never deletes in a replica) or sync (mirrors deletions too)."
    )
    interval_s: float = Field(30.0, gt=0, description="Seconds between replication runs of this bucket.")

    @model_validator(mode="after")
    def _replicas_elsewhere(self) -> BucketReplication:
        for r in self.replicas:
            if r == self.source:
                raise ValueError(f"replica {r.region}/{r.bucket} is the source itself")
        return self


class DataConfig(_Model):
    endpoints: dict[str, S3Endpoint] = Field(
        default_factory=dict,
        description="S3-compatible endpoint per region; a region not listed uses the default.",
    )
    buckets: list[BucketReplication] = Field(
        default_factory=list, description="Buckets replicated between regions."
    )
    check_timeout_s: float = Field(
        300.0, gt=0, description="Deadline for one rclone run (copy, check or listing), s."
    )

    def endpoint(self, region: str) -> S3Endpoint:
        return self.endpoints.get(region) or S3Endpoint()

    def regions_named(self) -> list[tuple[str, str]]:
        """(field path, region) of every region this section names, for the fleet's cross-check."""
        out = [(f"data.endpoints.{r}", r) for r in self.endpoints]
        for i, b in enumerate(self.buckets):
            out.append((f"data.buckets[{i}].source.region", b.source.region))
            out += [(f"data.buckets[{i}].replicas[{j}].region", r.region) for j, r in enumerate(b.replicas)]
        return out
