"""The failover's RPO check (the check_rpo activity) on a replica its worker cannot read.

rclone against a replica bucket that answers 403 exits 1 with no --combined line; the check must
come back with the lag unknown and the store's reason, so the failover refuses it as it refuses any
unmeasured lag, instead of reading "in sync" and moving traffic onto stale data.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.testing import ActivityEnvironment

from activities.replicate import ReplicateActivities
from drctl.devstack.moto_seed import MODEL_FILES
from drctl.models.rpo import RpoCheckInput, replica_pairs
from drctl.providers.rclone import Rclone
from tests.support.fault_proxy import Fault, KubeFaultProxy
from tests.support.loop_thread import LoopThread
from tests.support.moto import aws_client
from tests.support.ports import free_port
from tests.support.replication import fleet

DENIED = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    "<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>1</RequestId></Error>"
)


def test_an_unreadable_replica_makes_the_rpo_check_unknown(moto_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    src, dst = f"src-{tag}", f"dst-{tag}"
    s3 = aws_client("s3", moto_url)
    for b in (src, dst):
        s3.create_bucket(Bucket=b)
    for key, body in MODEL_FILES.items():
        s3.put_object(Bucket=src, Key=key, Body=body)
    (pair,) = replica_pairs(fleet(moto_url, src, dst))
    Rclone(fleet(moto_url, src, dst)).transfer(pair)  # the replica holds everything

    loop, port = LoopThread(), free_port()
    proxy = KubeFaultProxy(moto_url)
    denied = proxy.add(Fault("GET", f"/{dst}/?", status=403, body=DENIED))
    loop.serve_app(proxy.app(), port)
    try:
        acts = ReplicateActivities(fleet(f"http://127.0.0.1:{port}", src, dst))
        inp = RpoCheckInput(target="us-east-1", parity=False)
        check = asyncio.run(ActivityEnvironment().run(acts.check_rpo, inp))
    finally:
        loop.close()
    assert denied.hits >= 1
    assert check.lag_s is None and check.exceeded, check
    assert "replication lag of us-east-1 unknown" in check.describe()
    assert "AccessDenied" in check.describe(), check.describe()
