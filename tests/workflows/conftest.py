"""Workflow test fixtures: drctl's real workers, in-process (tests/support/workers.py)."""

from tests.support.workers import start_workers

__all__ = ["start_workers"]
