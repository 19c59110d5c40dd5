"""What an rclone run's exit code and log say: one table, and the reading of `rclone check`.

The codes are rclone's own (lib/exitcode/exitcode.go). rclone decides them from the last error it
counted, so 1 ("uncategorised") covers both a dropped connection and an S3 403: the S3 error code
in its message, when there is one, decides between them through drctl's one AWS error table.
"""

from __future__ import annotations

import json
import re

from drctl.providers.errors import ErrorClass, ProviderError, aws_code_class

# exit code → (kind, retryable). A retry here is the caller's bounded retry policy (or the
# Replicate workflow's next run), after rclone's own --retries already ran.
EXIT_CODES: dict[int, tuple[str, bool]] = {
    1: ("RcloneError", True),  # uncategorised: nothing says it is permanent
    2: ("RcloneUsage", False),  # syntax or usage error: the same argv fails the same way
    3: ("NotFound", False),  # directory (bucket) not found
    4: ("NotFound", False),  # file not found
    5: ("Unavailable", True),  # temporary error: rclone itself says retry
    6: ("RcloneNoRetry", False),  # "less serious" errors the backend marked as not to be retried
    7: ("RcloneFatal", False),  # fatal: e.g. a backend that refuses the account
    8: ("TransferLimit", True),  # --max-transfer reached: the next run goes on from there
    9: ("NoFilesTransferred", False),  # only with --error-on-no-transfer, which drctl never passes
}
# A run killed at its deadline (drctl's own bound, not rclone's).
TIMED_OUT = -1
_S3_CODE = re.compile(r"\b([A-Z][A-Za-z]+): ")


class RcloneError(ProviderError):
    def __init__(self, action: str, code: int, detail: str) -> None:
        kind, retryable = ("Timeout", True) if code < 0 else EXIT_CODES.get(code, ("RcloneError", True))
        if code == 1:
            # An S3 error code in the message (AccessDenied, InvalidAccessKeyId, SlowDown, ...).
            for name in _S3_CODE.findall(detail):
                known = aws_code_class(name)
                if known is not None:
                    kind, retryable = known
                    break
        super().__init__(
            ErrorClass(kind=kind, retryable=retryable, message=f"{action}: rclone exit {code}: {detail}")
        )
        self.code = code


def _entries(lines: list[str]) -> list[dict[str, object] | str]:
    """--use-json-log entries, and plain lines (rclone's final "Failed to ...", which spans lines:
    a continuation starts with a tab) joined back into one."""
    out: list[dict[str, object] | str] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            if line[:1].isspace() and out and isinstance(out[-1], str):
                out[-1] = f"{out[-1]} {line.strip()}"
            elif line.strip():
                out.append(line.strip())
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def last_error(lines: list[str]) -> str:
    """rclone's last error-level message (--use-json-log), else its last plain line."""
    entries = _entries(lines)
    for entry in reversed(entries):
        if isinstance(entry, dict) and entry.get("level") in ("error", "critical"):
            return " ".join(str(entry.get("msg", "")).split())[:300]
    plain = [e for e in entries if isinstance(e, str)]
    return plain[-1][:300] if plain else "no error message"


def unanswered(log: list[str], marked: int) -> str | None:
    """Why an `rclone check` that exited 1 did not compare everything, or None if it did.

    Exit 1 is an answer ("differences found") only when each difference is one object's: every
    error-level entry names an object, and the differences rclone counted are all among the
    `marked` --combined lines. A bucket it could not list (a 403 on the replica) is logged against
    the remote itself, with no --combined line at all, and must not read as "in sync".
    """
    counted = None
    for entry in _entries(log):
        if isinstance(entry, str):
            continue
        msg = str(entry.get("msg", "")).strip()
        if entry.get("level") in ("error", "critical") and not str(entry.get("objectType", "")).endswith(
            "Object"
        ):
            return f"{entry.get('object') or 'rclone'}: {msg}"[:300]
        found = re.fullmatch(r"(\d+) differences found", msg)
        if found:
            counted = int(found.group(1))
    if counted is None or marked == 0:
        return f"rclone check exited 1 with no differences listed ({last_error(log)})"
    if counted > marked:
        return f"rclone counted {counted} differences but listed {marked} ({last_error(log)})"
    return None
