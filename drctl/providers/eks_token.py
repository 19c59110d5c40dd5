"""EKS bearer tokens, as `aws eks get-token` prints them, without the AWS CLI in the worker image.

A token is a presigned STS GetCallerIdentity URL, signed with the caller's IAM credentials and bound
to one cluster by the signed `x-k8s-aws-id` header; the cluster's authenticator replays it to STS to
learn who is asking. A kubeconfig runs `drctl eks-token` as its exec plugin, and the Kubernetes
client runs it again when the expiry it reported has passed.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import boto3

K8S_AWS_ID = "x-k8s-aws-id"
TOKEN_PREFIX = "k8s-aws-v1."
# EKS accepts a token for 15 minutes from signing whatever X-Amz-Expires says; 60 s is what the AWS
# CLI signs with. Report expiry a minute early so the client refreshes before the server refuses.
URL_EXPIRES_S = 60
TOKEN_LIFETIME = dt.timedelta(minutes=14)


def presigned_url(cluster: str, region: str, session: boto3.Session | None = None) -> str:
    """GetCallerIdentity presigned for `cluster`, against the regional STS endpoint."""
    sts = (session or boto3.Session()).client(
        "sts", region_name=region, endpoint_url=f"https://sts.{region}.amazonaws.com"
    )

    # The header is not an API parameter: carry it from the call's params to the request to sign.
    def carry(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if K8S_AWS_ID in params:
            context[K8S_AWS_ID] = params.pop(K8S_AWS_ID)

    def inject(request: Any, **_: Any) -> None:
        if K8S_AWS_ID in request.context:
            request.headers[K8S_AWS_ID] = request.context[K8S_AWS_ID]

    sts.meta.events.register("provide-client-params.sts.GetCallerIdentity", carry)
    sts.meta.events.register("before-sign.sts.GetCallerIdentity", inject)
    return str(
        sts.generate_presigned_url(
            "get_caller_identity", Params={K8S_AWS_ID: cluster}, ExpiresIn=URL_EXPIRES_S, HttpMethod="GET"
        )
    )


def exec_credential(cluster: str, region: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """The ExecCredential a kubeconfig exec plugin prints on stdout."""
    url = presigned_url(cluster, region)
    token = TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    expires = (now or dt.datetime.now(dt.UTC)) + TOKEN_LIFETIME
    return {
        "kind": "ExecCredential",
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "spec": {},
        "status": {"expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "token": token},
    }
