"""Moved to tests.helpers (the one helpers module); kept so existing imports keep working."""

from tests.helpers import cli, run_cli

__all__ = ["cli", "run_cli"]
