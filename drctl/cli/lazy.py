"""A module imported on first use, for command modules whose help must not pay for it.

`drctl X -h` and Tab completion import X's module to read its options; the Temporal client and
the pydantic models it uses at run time cost most of a second to import. `tc = Lazy("temporalio.client")`
then `tc.Schedule(...)` imports temporalio.client the first time a command body touches it. Under
TYPE_CHECKING the same alias is the real module, so mypy checks every use.
"""

from __future__ import annotations

import importlib
from typing import Any


class Lazy:
    """Stands for the module `name` until an attribute is read from it."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)  # sys.modules caches it
