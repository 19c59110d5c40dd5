"""Upgrade and backup fixtures: the backup stack (tests/support/backup_stack.py)."""

from tests.support.backup_stack import backup_stack

__all__ = ["backup_stack"]
