"""Drill fixtures: the workflow tests' real in-process workers (fresh task queues per test)."""

from tests.workflows.conftest import start_workers  # noqa: F401 - re-exported fixture
