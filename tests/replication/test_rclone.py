"""The rclone provider against a real moto S3 server: copy, sync, check and lag, as a replica sees them."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from drctl.config.schema import ConfigError, FleetConfig, parse_config
from drctl.devstack.moto_seed import MODEL_FILES
from drctl.models.rpo import ReplicaPair, replica_pairs
from drctl.providers.errors import ProviderError
from drctl.providers.rclone import Rclone, RcloneError
from tests.support.fault_proxy import Fault, KubeFaultProxy
from tests.support.loop_thread import LoopThread
from tests.support.moto import aws_client
from tests.support.ports import free_port
from tests.support.replication import BASE, fleet


def s3(url: str) -> Any:
    return aws_client("s3", url)


@pytest.fixture
def buckets(moto_url: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    src, dst = f"src-{tag}", f"dst-{tag}"
    c = s3(moto_url)
    for b in (src, dst):
        c.create_bucket(Bucket=b)
    for key, body in MODEL_FILES.items():
        c.put_object(Bucket=src, Key=key, Body=body)
    return src, dst


@pytest.fixture(autouse=True)
def ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    # The failure mode the provider must survive: AWS_CA_BUNDLE set while the endpoint is plain HTTP.
    monkeypatch.setenv("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")


def pair_of(cfg: FleetConfig) -> ReplicaPair:
    (pair,) = replica_pairs(cfg)
    return pair


def test_copy_moves_the_model_then_check_finds_it_in_sync(moto_url: str, buckets: tuple[str, str]) -> None:
    cfg = fleet(moto_url, *buckets)
    rc, pair = Rclone(cfg), pair_of(cfg)
    before = rc.measure_lag(pair)
    assert before.missing == len(MODEL_FILES) and before.lag_s is not None and before.lag_s >= 0
    seen: list[int] = []
    stats = rc.transfer(pair, on_progress=lambda s: seen.append(s.transfers))
    assert stats.transfers == len(MODEL_FILES)
    assert stats.bytes == sum(len(b) for b in MODEL_FILES.values())
    assert seen, "no --stats line reached the progress callback"
    keys = {o["Key"] for o in s3(moto_url).list_objects_v2(Bucket=buckets[1])["Contents"]}
    assert keys == set(MODEL_FILES)
    after = rc.measure_lag(pair)
    assert (after.lag_s, after.missing, after.differ, after.error) == (0.0, 0, 0, None)
    assert after.source_objects == len(MODEL_FILES)
    # A second run has nothing to move.
    assert rc.transfer(pair).transfers == 0


def test_a_deleted_adapter_is_lag_until_the_next_run(moto_url: str, buckets: tuple[str, str]) -> None:
    cfg = fleet(moto_url, *buckets)
    rc, pair = Rclone(cfg), pair_of(cfg)
    rc.transfer(pair)
    adapter = "adapters/support-lora/adapter_model.safetensors"
    s3(moto_url).delete_object(Bucket=buckets[1], Key=adapter)
    time.sleep(0.3)
    lag = rc.measure_lag(pair)
    assert lag.missing == 1 and lag.oldest_unreplicated == adapter
    assert lag.lag_s is not None and lag.lag_s >= 0.3
    # A changed object in the source counts too, from the time it was written.
    s3(moto_url).put_object(
        Bucket=buckets[0], Key="fleetsim-tiny/tokenizer_config.json", Body=b'{"changed": 1}'
    )
    lag = rc.measure_lag(pair)
    assert (lag.missing, lag.differ) == (1, 1)
    stats = rc.transfer(pair)
    assert stats.transfers == 2
    assert rc.measure_lag(pair).lag_s == 0.0


def test_sync_mirrors_deletions_and_copy_does_not(moto_url: str, buckets: tuple[str, str]) -> None:
    gone = "fleetsim-tiny/config.json"
    for mode, kept in (("copy", True), ("sync", False)):
        cfg = fleet(moto_url, *buckets, mode=mode)
        rc, pair = Rclone(cfg), pair_of(cfg)
        rc.transfer(pair)
        s3(moto_url).delete_object(Bucket=buckets[0], Key=gone)
        stats = rc.transfer(pair)
        keys = {o["Key"] for o in s3(moto_url).list_objects_v2(Bucket=buckets[1])["Contents"]}
        assert (gone in keys) is kept, mode
        assert stats.deletes == (0 if kept else 1)
        s3(moto_url).put_object(Bucket=buckets[0], Key=gone, Body=MODEL_FILES[gone])


def test_missing_source_bucket_is_a_non_retryable_error(moto_url: str) -> None:
    cfg = fleet(moto_url, "no-such-src", "no-such-dst")
    rc, pair = Rclone(cfg), pair_of(cfg)
    with pytest.raises(RcloneError) as info:
        rc.transfer(pair)
    assert info.value.error.kind == "NotFound" and not info.value.error.retryable
    lag = rc.measure_lag(pair)
    assert lag.lag_s is None and "no-such-src" in (lag.error or "") + pair.source_bucket


def test_named_credential_variables_must_be_set(
    moto_url: str, buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = (
        "  endpoints:\n"
        "    us-east-1: {access_key_id_env: DRCTL_TEST_KEY, secret_access_key_env: DRCTL_TEST_SECRET}\n"
    )
    cfg = fleet(moto_url, *buckets, extra=extra)
    monkeypatch.delenv("DRCTL_TEST_KEY", raising=False)
    with pytest.raises(ProviderError, match="DRCTL_TEST_KEY"):
        Rclone(cfg).transfer(pair_of(cfg))
    monkeypatch.setenv("DRCTL_TEST_KEY", "k")
    monkeypatch.setenv("DRCTL_TEST_SECRET", "s")
    env = Rclone(cfg).env({"dst": "us-east-1"})
    assert env["RCLONE_CONFIG_DST_ACCESS_KEY_ID"] == "k" and "AWS_CA_BUNDLE" not in env
    assert Rclone(cfg).transfer(pair_of(cfg)).transfers == len(MODEL_FILES)


def test_config_names_the_unknown_region(moto_url: str) -> None:
    text = BASE.format(
        url=moto_url,
        data="  buckets:\n    - {name: m, source: {region: eu-west-9, bucket: abc},\n"
        "       replicas: [{region: us-east-1, bucket: abd}]}\n",
    )
    with pytest.raises(ConfigError, match=r"data.buckets\[0\].source.region \(eu-west-9\)"):
        parse_config(text)


def test_a_measurement_answers_within_its_one_bound(moto_url: str, buckets: tuple[str, str]) -> None:
    """The listing and the check share `timeout_s`: a replica bucket that never answers (S3 behind
    a proxy that stalls its reads) ends the measurement at the bound, not a bound per command, so
    the failover's RPO check answers before its activity times out."""
    src, dst = buckets
    loop, port = LoopThread(), free_port()
    proxy = KubeFaultProxy(moto_url)
    stalled = proxy.add(Fault("GET", f"/{dst}/?", status=0))
    loop.serve_app(proxy.app(), port)
    try:
        cfg, bound = fleet(f"http://127.0.0.1:{port}", src, dst), 3.0
        rc, pair = Rclone(cfg, timeout_s=bound), pair_of(cfg)
        started = time.monotonic()
        lag = rc.measure_lag(pair)
        took = time.monotonic() - started
        assert stalled.hits >= 1  # the listing passed; the check met the stall
        assert lag.error and "no answer within" in lag.error and lag.lag_s is None, lag
        assert took < bound + 1.5, took
        # A bound already spent starts no rclone at all, and says so.
        lag = rc.measure_lag(pair, deadline=time.monotonic())
        assert lag.error and f"not started: the {bound:g} s bound was spent" in lag.error, lag
    finally:
        loop.close()


def s3_error(code: str) -> str:
    """An S3 error body as S3 sends it."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{code} (injected)</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>"
    )


def test_an_unreadable_replica_is_an_unknown_lag_not_in_sync(moto_url: str, buckets: tuple[str, str]) -> None:
    """rclone check against a replica answering 403 exits 1 with no --combined line, the code it
    also gives for differences found: that is no answer, and the lag is unknown with S3's reason."""
    src, dst = buckets
    loop, port = LoopThread(), free_port()
    proxy = KubeFaultProxy(moto_url)
    denied = proxy.add(Fault("GET", f"/{dst}/?", status=403, body=s3_error("AccessDenied")))
    loop.serve_app(proxy.app(), port)
    try:
        cfg = fleet(f"http://127.0.0.1:{port}", src, dst)
        rc, pair = Rclone(cfg), pair_of(cfg)
        Rclone(fleet(moto_url, src, dst)).transfer(pair)  # in sync, as far as anyone can read
        lag = rc.measure_lag(pair)
        assert denied.hits >= 1
        assert lag.lag_s is None and lag.error and "AccessDenied" in lag.error, lag
        # A copy into it: a 403 is not healed by a retry.
        with pytest.raises(RcloneError) as info:
            rc.transfer(pair)
        assert (info.value.error.kind, info.value.error.retryable) == ("Forbidden", False), info.value
    finally:
        loop.close()


def test_a_throttled_replica_is_retryable(moto_url: str, buckets: tuple[str, str]) -> None:
    """rclone exits 1 (uncategorised) for a 503 SlowDown too: a retry heals it, so it must not be
    the permanent failure a usage error is."""
    src, dst = buckets
    loop, port = LoopThread(), free_port()
    proxy = KubeFaultProxy(moto_url)
    proxy.add(Fault("GET", f"/{dst}/?", status=503, body=s3_error("SlowDown")))
    loop.serve_app(proxy.app(), port)
    try:
        cfg = fleet(f"http://127.0.0.1:{port}", src, dst)
        with pytest.raises(RcloneError) as info:
            Rclone(cfg).list_objects("us-east-1", dst)
        assert info.value.code == 1 and info.value.error.retryable, info.value
        assert info.value.error.kind == "RateLimited"
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [
        (1, "RcloneError", True),  # uncategorised, no S3 code in the message
        (2, "RcloneUsage", False),
        (3, "NotFound", False),
        (4, "NotFound", False),
        (5, "Unavailable", True),
        (6, "RcloneNoRetry", False),
        (7, "RcloneFatal", False),
        (8, "TransferLimit", True),
        (9, "NoFilesTransferred", False),
        (-1, "Timeout", True),
    ],
)
def test_exit_codes_follow_rclones_table(code: int, kind: str, retryable: bool) -> None:
    err = RcloneError("copy a → b", code, "something failed").error
    assert (err.kind, err.retryable) == (kind, retryable)
    assert f"rclone exit {code}" in err.message


def test_lag_counts_from_the_upload_not_the_files_mtime(moto_url: str, buckets: tuple[str, str]) -> None:
    """A week-old model file (rclone and `aws s3 cp` keep its mtime in X-Amz-Meta-Mtime) uploaded a
    moment ago is a moment of lag; and the listing reads no object one by one."""
    src, dst = buckets
    loop, port = LoopThread(), free_port()
    proxy = KubeFaultProxy(moto_url)
    heads = proxy.add(Fault("HEAD", ".*", times=0))  # counts, never fails
    loop.serve_app(proxy.app(), port)
    try:
        cfg = fleet(moto_url, src, dst)
        pair = pair_of(cfg)
        Rclone(cfg).transfer(pair)
        week_ago = time.time() - 7 * 86400
        s3(moto_url).put_object(
            Bucket=src, Key="weights/old.safetensors", Body=b"w" * 64, Metadata={"mtime": f"{week_ago:.9f}"}
        )
        lag = Rclone(cfg).measure_lag(pair)
        assert lag.missing == 1 and lag.oldest_unreplicated == "weights/old.safetensors", lag
        assert lag.lag_s is not None and lag.lag_s < 3600, lag  # a week would be 604800
        # The same measurement through a proxy that counts HEADs: one listing, no request per object.
        counted = Rclone(fleet(f"http://127.0.0.1:{port}", src, dst)).measure_lag(pair)
        assert counted.missing == 1 and counted.source_objects == len(MODEL_FILES) + 1, counted
        assert heads.hits == 0
    finally:
        loop.close()
