"""Drill fixtures: the workflow tests' real in-process workers (fresh task queues per test), and the
stand-in region admin API that records fault calls (both in tests/support/)."""

from tests.support.admin_recorder import admin_recorder
from tests.support.workers import start_workers

__all__ = ["admin_recorder", "start_workers"]
