"""`drctl --fleet NAME`: the top-level option, kept here for the command it runs (no imports: the
top level stays fast)."""

from __future__ import annotations

fleet_flag: str | None = None
