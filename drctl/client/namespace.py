"""Does the Temporal namespace have every search attribute drctl upserts?

Upserting an unregistered attribute fails the workflow task forever (BadSearchAttributes), so a
worker on such a namespace would take every task and complete none. The worker checks this before
it reports ready (drctl/worker/endpoint.py) and exports the result as a metric for the alert.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

from drctl.models.search_attributes import ALL

_KEYWORD = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD


async def search_attribute_problems(client: Client, timeout_s: float = 3.0) -> list[str]:
    """One line per attribute the namespace lacks or indexes with the wrong type; [] when all is well.

    Raises the RPC error when the operator service cannot answer (the caller reports it).
    """
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace), timeout=timedelta(seconds=timeout_s)
    )
    have = dict(resp.custom_attributes)
    problems: list[str] = []
    for key in ALL:
        if key.name not in have:
            problems.append(f"{key.name} missing")
        elif have[key.name] != _KEYWORD:
            problems.append(f"{key.name} is {IndexedValueType.Name(have[key.name])}, drctl upserts Keyword")
    return problems


def register_hint(problems: list[str]) -> str:
    names = [p.split(" ", 1)[0] for p in problems]
    flags = " ".join(f"--name {n}" for n in names)
    return f"register them: temporal operator search-attribute create {flags} --type Keyword"
