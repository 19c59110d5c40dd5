"""Where secret files may live: `secret_dirs` and the config file's own (real) directory.

A secret directory is absolute: a relative one would be judged against whatever directory the
command ran from. It is not `/`, not a top-level system directory (/etc, /usr, /var, /home ...,
whose files any path could then name), and not inside /proc, /sys or /dev, whose files are views
of the running system (/proc/self/environ holds the worker's environment). A subdirectory of a
system directory is fine: the defaults are /var/run/secrets, /run/secrets and /etc/drctl.

Relative secret paths in a config resolve against the directory of the config file's real path
(symlinks resolved first), and that directory is allowed too, unless it is itself a system
directory. A config reached through a symlink therefore works as it does at its real path.
"""

from __future__ import annotations

import os

# Refused as a secret directory themselves (their subdirectories are fine).
SYSTEM_DIRS = frozenset(
    {
        "/",
        "/bin",
        "/boot",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/media",
        "/mnt",
        "/opt",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/usr",
        "/var",
        "/var/run",
    }
)
# Refused with everything under them: not files, but views of the running system.
PSEUDO_FS = ("/proc", "/sys", "/dev")


def system_dir(path: str) -> str | None:
    """Why `path` (absolute) may not hold secrets, or None when it may; judged as written and real."""
    for p in dict.fromkeys((os.path.normpath(path), os.path.realpath(path))):
        if p in SYSTEM_DIRS:
            return f"{p} is {'the root directory' if p == '/' else 'a system directory'}"
        for fs in PSEUDO_FS:
            if p == fs or p.startswith(fs + "/"):
                return f"{p} is in {fs}, a view of the running system"
    return None


def check_secret_dir(v: str) -> str:
    """A field validator body for one `secret_dirs` entry."""
    if not v or not os.path.isabs(v):
        raise ValueError(
            f"{v[:80]!r} is not an absolute path: a relative one would depend on the working directory"
        )
    why = system_dir(v)
    if why:
        raise ValueError(f"{why}: secret files may not be read from anywhere in it")
    return os.path.normpath(v)


def config_dir(source_path: str) -> str:
    """The real directory of a config file: relative paths in it resolve here, symlinks resolved."""
    return os.path.dirname(os.path.realpath(source_path))


def secret_roots(secret_dirs: list[str], source_path: str | None) -> list[str]:
    """Real paths of the directories secret files may live in."""
    roots = [os.path.realpath(d) for d in secret_dirs]
    if source_path:
        own = config_dir(source_path)
        if system_dir(own) is None:
            roots.append(own)
    return roots


def inside(path: str, roots: list[str]) -> bool:
    """Whether `path`, symlinks and `..` resolved, is one of `roots` or below one."""
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)
