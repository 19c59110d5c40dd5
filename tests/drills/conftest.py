"""Drill fixtures: the workflow tests' real in-process workers (fresh task queues per test), and the
stand-in region admin API that records fault calls (tests/drills/admin_recorder.py)."""

from tests.drills.admin_recorder import admin_recorder
from tests.workflows.conftest import start_workers

__all__ = ["admin_recorder", "start_workers"]
