"""The HAProxy binaries tests run against: Debian's (2.6 here) and, where present, a real 3.2 build.

The 3.2 build lives beside the repository, in `../shared/tools/haproxy-3.2/` (resolved from the
repository's parent directory); a user's clone does not have it, so its tests skip.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEBIAN = "/usr/sbin/haproxy"
HAPROXY_32 = REPO.parent / "shared" / "tools" / "haproxy-3.2" / "haproxy"
NO_32 = f"no HAProxy 3.2 build at {HAPROXY_32}"


def debian() -> str:
    return shutil.which("haproxy", path="/usr/sbin:/usr/bin") or DEBIAN


def binaries() -> list[object]:
    """pytest params, one per HAProxy binary: Debian's, and 3.2 (skipped when absent)."""
    return [
        pytest.param(debian(), id="debian"),
        pytest.param(
            str(HAPROXY_32), id="3.2", marks=pytest.mark.skipif(not HAPROXY_32.exists(), reason=NO_32)
        ),
    ]
