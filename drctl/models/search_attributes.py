"""The one registry of search attributes drctl upserts.

An unregistered attribute makes a workflow task fail forever (BadSearchAttributes), so the dev
stack and the test fixtures register every one of these at server start.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

FLEET = SearchAttributeKey.for_keyword("DrctlFleet")
OPERATION = SearchAttributeKey.for_keyword("DrctlOperation")
PHASE = SearchAttributeKey.for_keyword("DrctlPhase")
SOURCE_REGION = SearchAttributeKey.for_keyword("DrctlSourceRegion")
TARGET_REGION = SearchAttributeKey.for_keyword("DrctlTargetRegion")
VERDICT = SearchAttributeKey.for_keyword("DrctlVerdict")
# Who started the operation (drctl.client.identity); absent on operations started before it existed.
INITIATOR = SearchAttributeKey.for_keyword("DrctlInitiator")

ALL = [FLEET, OPERATION, PHASE, SOURCE_REGION, TARGET_REGION, VERDICT, INITIATOR]


def cli_flags() -> list[str]:
    """`--search-attribute` flags for `temporal server start-dev`."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}=Keyword"]
    return flags
