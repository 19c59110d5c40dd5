"""Session-wide hooks and fixture registrations; the fixtures themselves live in tests/support/.

Registered here for every test: the session dev stack (fleet_config_path, fleet_config, dev_stack,
temporal_client, reset_fleet: tests/support/devstack.py), a private Temporal dev server per module
(temporal_env: tests/support/temporal.py) and a moto server per module (moto_url:
tests/support/moto.py).
"""

from __future__ import annotations

import pytest

from tests.support.devstack import dev_stack, fleet_config, fleet_config_path, reset_fleet, temporal_client
from tests.support.moto import moto_url
from tests.support.temporal import temporal_env

__all__ = [
    "dev_stack",
    "fleet_config",
    "fleet_config_path",
    "moto_url",
    "reset_fleet",
    "temporal_client",
    "temporal_env",
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "devstack: uses the session-wide dev stack (the dev_stack fixture)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for `pytest -n 2 --dist loadgroup` (what `make test` runs).

    The tests on the session dev stack form two groups of about equal length, the failover-path
    workflows and the rest: each group stays in order on one worker, so the run brings up at most one
    dev stack per worker (two in all), never one per test. Every other module is a group of its own,
    so a module-scoped stack (Temporal, moto, a cluster) comes up once. Without xdist the marks do
    nothing and the whole run shares one dev stack.
    """
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        on_stack = "dev_stack" in getattr(item, "fixturenames", ()) or item.get_closest_marker("devstack")
        if on_stack:
            group = "devstack-workflows" if module.startswith("tests/workflows/") else "devstack"
        else:
            group = module
        item.add_marker(pytest.mark.xdist_group(group))
