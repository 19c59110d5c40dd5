"""Every executable the product starts, in one registry.

The worker image must carry each one: tests/test_worker_image.py checks that every subprocess the
product code starts takes its program from here, and that the Dockerfile installs every entry.
A program found on the developer's PATH but missing from the image would otherwise fail only in
production (rclone did: replication, migration and the failover's RPO check all ended `RcloneMissing`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from drctl.providers.errors import ErrorClass, ProviderError


@dataclass(frozen=True)
class Binary:
    """A program found on PATH, from a Debian package in the image."""

    name: str
    debian_package: str
    missing_kind: str  # the non-retryable error type an activity raises when it is absent


@dataclass(frozen=True)
class PythonModule:
    """A CLI run as `python -m <module>` under the worker's own interpreter: a locked dependency."""

    module: str
    distribution: str


RCLONE = Binary("rclone", debian_package="rclone", missing_kind="RcloneMissing")
# The `chaos` CLI, as a module of the worker's interpreter so it runs in the worker's own venv.
CHAOS = PythonModule("chaostoolkit", distribution="chaostoolkit")

BINARIES = (RCLONE,)
PYTHON_MODULES = (CHAOS,)


def path(binary: Binary) -> str:
    """The program's full path, or a non-retryable error naming the package that provides it."""
    found = shutil.which(binary.name)
    if not found and os.path.exists(f"/usr/bin/{binary.name}"):
        found = f"/usr/bin/{binary.name}"
    if not found:
        raise ProviderError(
            ErrorClass(
                kind=binary.missing_kind,
                retryable=False,
                message=f"{binary.name} is not installed (Debian: apt-get install {binary.debian_package})",
            )
        )
    return found
