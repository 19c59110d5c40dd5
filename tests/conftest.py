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
    config.addinivalue_line(
        "markers", "flows: a dev-stack test of tests/workflows/, its own shard: `make test-e2e`"
    )


def stack_lane(module: str) -> str:
    """The xdist group of a test on the session dev stack: four lanes of about equal length (9 to
    11 minutes each on 2 loaded cores), two per shard, so a shard's two workers bring up one dev
    stack each and its wall time is one lane's."""
    if module.startswith("tests/workflows/"):
        return "devstack-workflows-1" if module < "tests/workflows/test_g" else "devstack-workflows-2"
    if module.startswith(("tests/upgrade/", "tests/replication/")):
        return "devstack-upgrade"
    return "devstack-drills"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks and groups for the shards and for `pytest -n 2 --dist loadgroup`. Runs before `-m`
    selects, so the shards can select on the marks added here.

    Shards (each `-m` picks one, and together they take every test once): `make test` runs the
    tests on no dev stack; `make test-e2e` those of tests/workflows/ on a dev stack (mark
    `flows`); `make test-stacks` the other dev-stack tests, session stack (mark `devstack`, added
    here from the fixture) or private (`ownstack`); `make test-crash` the crash suite (`crash`).

    The tests on the session dev stack form four lanes (`stack_lane`); each lane stays in order on
    one worker, so the run brings up at most one dev stack per worker, never one per test. Every
    other module is a group of its own, so a module-scoped stack (Temporal, moto, a cluster) comes
    up once. Without xdist the marks do nothing and the whole run shares one dev stack.
    """
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        on_stack = "dev_stack" in getattr(item, "fixturenames", ()) or item.get_closest_marker("devstack")
        if on_stack and not item.get_closest_marker("devstack"):
            item.add_marker(pytest.mark.devstack)
        if module.startswith("tests/workflows/") and (on_stack or item.get_closest_marker("ownstack")):
            item.add_marker(pytest.mark.flows)
        item.add_marker(pytest.mark.xdist_group(stack_lane(module) if on_stack else module))
