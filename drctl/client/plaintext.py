"""Refusing plaintext so that Temporal closes what it reached, rather than retrying it forever.

With a codec configured, a payload that is not ciphertext (a workflow started by a client without
the keys) must fail what it was sent to. The codec itself cannot do that: an exception raised in a
codec's decode fails the *workflow task*, which Temporal retries until someone intervenes, so the
workflow stays Running. The SDK fails the workflow (not the task) for a
`temporalio.exceptions.FailureError` raised by the *payload converter* while it converts arguments
(worker/_workflow_instance.py `_convert_payloads`). So the codec hands such a payload on marked
(encoding `binary/drctl-refused`, with the reason), and the converter below raises a non-retryable
`ApplicationError` for the mark:
- a workflow's input: the workflow fails, with the reason;
- an update's argument: the update is rejected; a query's: the query fails; a signal's: the SDK
  drops the signal and logs why (it never fails the workflow for a signal it cannot read);
- an activity's input: the SDK wraps any decode error as a *retryable* "Failed decoding arguments",
  so for activities the data converter passes a `RefusedInput` in the argument's place instead, and
  the `RefuseMarkedInput` interceptor fails the activity non-retryably before it runs.

The reasons are fixed texts chosen here, never the payload's own bytes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from temporalio import activity, client, worker
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    EncodingPayloadConverter,
    SerializationContext,
)
from temporalio.exceptions import ApplicationError

REFUSED = b"binary/drctl-refused"
REASON = "drctl-refused-reason"
_ALLOW = "temporal.codec.allow_plaintext: true admits plaintext during a migration window"
REASONS = {
    b"plaintext": "plaintext payload refused: this fleet encrypts every payload (temporal.codec), so "
    f"start workflows with drctl and the codec keys; {_ALLOW}",
    b"unbound": "payload encrypted without a namespace binding refused (written before the binding); "
    + _ALLOW,
}


class PayloadRefused(ApplicationError):
    """A payload the codec would not open, as Temporal sees it: non-retryable, type PlaintextRefused."""

    def __init__(self, reason: bytes) -> None:
        super().__init__(
            REASONS.get(reason, REASONS[b"plaintext"]), type="PlaintextRefused", non_retryable=True
        )


def marked(reason: bytes) -> Payload:
    """What the codec's decode returns for a payload it refuses (`reason`: a key of REASONS)."""
    return Payload(metadata={"encoding": REFUSED, REASON: reason})


class _RefusedConverter(EncodingPayloadConverter):
    """Converts nothing to a payload; converting a marked payload back raises PayloadRefused."""

    @property
    def encoding(self) -> str:
        return REFUSED.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> NoReturn:
        raise PayloadRefused(payload.metadata.get(REASON, b""))


class CodecPayloadConverter(PydanticPayloadConverter):
    """drctl's pydantic converter, plus the refusal of marked payloads (last: it encodes nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self._set_converters(*self.converters.values(), _RefusedConverter())


@dataclass(frozen=True)
class RefusedInput:
    """An activity argument the codec refused, passed in the argument's place (see the module doc)."""

    reason: bytes


@dataclass(frozen=True)
class CodecDataConverter(DataConverter):
    """The data converter used with the codec. In an activity worker (an activity serialization
    context) a refused input becomes `RefusedInput`s instead of an error the SDK would retry."""

    for_activity: bool = False

    def with_context(self, context: SerializationContext) -> CodecDataConverter:
        out = super().with_context(context)
        in_activity = isinstance(context, ActivitySerializationContext)
        if out.for_activity != in_activity:
            out = copy.copy(out)  # not dataclasses.replace: that rebuilds the context-bound converter
            object.__setattr__(out, "for_activity", in_activity)
        return out

    async def decode(self, payloads: Sequence[Payload], type_hints: list[type] | None = None) -> list[Any]:
        try:
            return await super().decode(payloads, type_hints)
        except PayloadRefused:
            if not self.for_activity:
                raise
            reason = next((p.metadata.get(REASON, b"") for p in payloads if _is_marked(p)), b"")
            return [RefusedInput(reason)] * len(payloads)


def _is_marked(p: Payload) -> bool:
    return p.metadata.get("encoding") == REFUSED


class _RefuseInbound(worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        for value in (*input.args, *activity.info().heartbeat_details):
            if isinstance(value, RefusedInput):
                raise PayloadRefused(value.reason)
        return await super().execute_activity(input)


class RefuseMarkedInput(client.Interceptor, worker.Interceptor):
    """On the codec client, so every worker built from it gets it: fails an activity whose input the
    codec refused, non-retryably and before the activity's code runs."""

    def intercept_activity(
        self, next: worker.ActivityInboundInterceptor
    ) -> worker.ActivityInboundInterceptor:
        return _RefuseInbound(next)


def codec_data_converter(codec: Any) -> CodecDataConverter:
    """The pydantic data converter with `codec` and the refusal of marked payloads."""
    return CodecDataConverter(payload_converter_class=CodecPayloadConverter, payload_codec=codec)
