"""rclone as a subprocess: copy or sync one bucket into a replica, check it, measure its lag.

Remotes are defined through rclone's environment configuration (RCLONE_CONFIG_<REMOTE>_<KEY>), so
no config file is written and credentials stay in the subprocess environment: they come from the
environment variables an endpoint names, or boto3's credential chain, never from workflow input.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from drctl.config.schema import FleetConfig
from drctl.models.rpo import LagReport, ReplicaPair, SourceObject, TransferStats, compute_lag
from drctl.providers import executables
from drctl.providers.aws import EMULATOR_KEYS
from drctl.providers.errors import ErrorClass, ProviderError

# rclone exit codes (docs: "Exit Code"): which ones a retry can heal.
_EXIT: dict[int, tuple[str, bool]] = {
    1: ("RcloneUsage", False),
    3: ("NotFound", False),  # directory (bucket) not found
    4: ("NotFound", False),
    5: ("Unavailable", True),  # temporary error
    7: ("RcloneFatal", False),  # e.g. bad credentials, access denied
}


class RcloneError(ProviderError):
    def __init__(self, action: str, code: int, detail: str) -> None:
        kind, retryable = _EXIT.get(code, ("RcloneFailed", True))
        super().__init__(
            ErrorClass(kind=kind, retryable=retryable, message=f"{action}: rclone exit {code}: {detail}")
        )
        self.code = code


def _last_error(lines: list[str]) -> str:
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            if line.strip():
                return line.strip()[:300]
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "critical"):
            return str(entry.get("msg", "")).strip()[:300]
    return "no error message"


def parse_stats(line: str) -> TransferStats | None:
    """The `stats` object of one --use-json-log line, or None for any other log line."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    st = entry.get("stats") if isinstance(entry, dict) else None
    if not isinstance(st, dict):
        return None
    return TransferStats(
        transfers=int(st.get("transfers", 0)),
        bytes=int(st.get("bytes", 0)),
        checks=int(st.get("checks", 0)),
        deletes=int(st.get("deletes", 0)),
        errors=int(st.get("errors", 0)),
        elapsed_s=round(float(st.get("elapsedTime", 0.0)), 3),
    )


class Rclone:
    def __init__(self, cfg: FleetConfig, timeout_s: float | None = None) -> None:
        self.cfg = cfg
        self.timeout_s = timeout_s or cfg.data.check_timeout_s

    # --- environment ------------------------------------------------------------------------------

    def _credentials(self, region: str) -> tuple[str, str] | None:
        ep = self.cfg.data.endpoint(region)
        if ep.access_key_id_env and ep.secret_access_key_env:
            key, secret = os.environ.get(ep.access_key_id_env), os.environ.get(ep.secret_access_key_env)
            if not key or not secret:
                raise ProviderError(
                    ErrorClass(
                        kind="Unauthorized",
                        retryable=False,
                        message=f"data.endpoints.{region}: {ep.access_key_id_env} "
                        f"or {ep.secret_access_key_env} is not set",
                    )
                )
            return key, secret
        import boto3

        creds = boto3.Session().get_credentials()
        if creds is not None:
            frozen = creds.get_frozen_credentials()
            return frozen.access_key, frozen.secret_key
        if self._endpoint_url(region):
            # A keyless emulator (moto) still needs a signature; same rule as drctl.providers.aws.
            return EMULATOR_KEYS["aws_access_key_id"], EMULATOR_KEYS["aws_secret_access_key"]
        return None

    def _endpoint_url(self, region: str) -> str | None:
        return self.cfg.data.endpoint(region).endpoint_url or self.cfg.aws.endpoint_url

    def env(self, remotes: dict[str, str]) -> dict[str, str]:
        """Subprocess environment defining each remote (name → fleet region) as an S3 remote."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RCLONE_CONFIG_")}
        for name, region in remotes.items():
            ep = self.cfg.data.endpoint(region)
            prefix = f"RCLONE_CONFIG_{name.upper()}_"
            env[prefix + "TYPE"] = "s3"
            env[prefix + "PROVIDER"] = ep.provider
            env[prefix + "REGION"] = ep.s3_region or region
            url = self._endpoint_url(region)
            if url:
                env[prefix + "ENDPOINT"] = url
                if url.startswith("http://"):
                    # rclone loads AWS_CA_BUNDLE even for plain HTTP and fails (LoadCustomCABundleError).
                    env.pop("AWS_CA_BUNDLE", None)
            creds = self._credentials(region)
            if creds:
                env[prefix + "ACCESS_KEY_ID"], env[prefix + "SECRET_ACCESS_KEY"] = creds
                env[prefix + "ENV_AUTH"] = "false"
            else:
                env[prefix + "ENV_AUTH"] = "true"
        return env

    @staticmethod
    def _remotes(pair: ReplicaPair) -> dict[str, str]:
        return {"src": pair.source_region, "dst": pair.replica_region}

    # --- commands ---------------------------------------------------------------------------------

    def transfer(
        self, pair: ReplicaPair, on_progress: Callable[[TransferStats], None] | None = None
    ) -> TransferStats:
        """`rclone copy|sync src:bucket dst:bucket`, reporting --stats every second."""
        argv = [
            executables.path(executables.RCLONE),
            pair.mode,
            f"src:{pair.source_bucket}",
            f"dst:{pair.replica_bucket}",
            "--use-json-log",
            "--stats",
            "1s",
            "--stats-log-level",
            "NOTICE",
            "--retries",
            "1",
        ]
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(self._remotes(pair)),
        )
        # rclone prints a stats line every second, so the loop below wakes at least that often; the
        # timer ends a hung transfer at the deadline.
        killer = threading.Timer(self.timeout_s, proc.kill)
        killer.start()
        lines: list[str] = []
        last = TransferStats()
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)
                del lines[:-50]
                stats = parse_stats(line)
                if stats is not None:
                    last = stats
                    if on_progress:
                        on_progress(stats)
            code = proc.wait()
        finally:
            killer.cancel()
            if proc.poll() is None:  # the caller gave up (e.g. a cancelled activity): leave no rclone behind
                proc.kill()
                proc.wait()
        if code != 0:
            detail = _last_error(lines) if code > 0 else f"killed after {self.timeout_s:g} s"
            raise RcloneError(
                f"{pair.mode} {pair.source_bucket} → {pair.replica_region}/{pair.replica_bucket}",
                code,
                detail,
            )
        return last

    def _run(
        self,
        action: str,
        argv: list[str],
        remotes: dict[str, str],
        ok_codes: tuple[int, ...] = (0,),
        deadline: float | None = None,
    ) -> str:
        """One rclone command, within `timeout_s` and before `deadline` (time.monotonic()), if given."""
        timeout_s = self.timeout_s if deadline is None else min(self.timeout_s, deadline - time.monotonic())
        if timeout_s <= 0:
            raise RcloneError(action, -1, f"not started: the {self.timeout_s:g} s bound was spent")
        try:
            # Few, short retries: an unreachable store must answer "unknown" within the caller's bound.
            done = subprocess.run(
                [
                    executables.path(executables.RCLONE),
                    *argv,
                    "--contimeout",
                    "3s",
                    "--low-level-retries",
                    "2",
                    "--retries",
                    "1",
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=self.env(remotes),
            )
        except subprocess.TimeoutExpired:
            raise RcloneError(action, -1, f"no answer within {timeout_s:g} s") from None
        if done.returncode not in ok_codes:
            raise RcloneError(action, done.returncode, _last_error(done.stderr.splitlines()))
        return done.stdout

    def check(self, pair: ReplicaPair, deadline: float | None = None) -> tuple[set[str], set[str]]:
        """`rclone check --one-way`: (paths missing in the replica, paths that differ)."""
        # Exit 1 means "differences found", which is an answer here, not a failure; an unreadable
        # bucket shows as "!" lines plus a non-zero error count and is raised below.
        out = self._run(
            f"check {pair.key}",
            [
                "check",
                f"src:{pair.source_bucket}",
                f"dst:{pair.replica_bucket}",
                "--one-way",
                "--combined",
                "-",
            ],
            self._remotes(pair),
            ok_codes=(0, 1),
            deadline=deadline,
        )
        missing, differ, errors = set(), set(), []
        # --combined marks: "+" only in the source (missing in the replica), "*" differs, "!" error,
        # "=" identical, "-" only in the replica (not lag; --one-way mostly omits it).
        for line in out.splitlines():
            mark, _, path = line.partition(" ")
            if mark == "+":
                missing.add(path)
            elif mark == "*":
                differ.add(path)
            elif mark == "!":
                errors.append(path)
        if errors:
            raise RcloneError(
                f"check {pair.key}", 1, f"{len(errors)} object(s) could not be compared: {errors[0]}"
            )
        return missing, differ

    def list_objects(self, region: str, bucket: str, deadline: float | None = None) -> list[SourceObject]:
        out = self._run(
            f"list {region}/{bucket}",
            ["lsjson", "-R", "--files-only", f"src:{bucket}"],
            {"src": region},
            deadline=deadline,
        )
        return [
            SourceObject(path=o["Path"], size=int(o["Size"]), mod_time=datetime.fromisoformat(o["ModTime"]))
            for o in json.loads(out or "[]")
        ]

    def measure_lag(self, pair: ReplicaPair, deadline: float | None = None) -> LagReport:
        """Lag of one replica: never raises, an unreachable bucket is reported in `error`.

        Its two rclone commands share one `timeout_s` between them (ending at `deadline`, a
        time.monotonic() value, when given), so the measurement as a whole answers within it: the
        failover's RPO check is bounded by it.
        """
        deadline = deadline if deadline is not None else time.monotonic() + self.timeout_s
        # The listing is the snapshot: objects written after it are not seen, so the lag is as of its start.
        listed_at = datetime.now(UTC)
        report = LagReport(
            bucket=pair.bucket,
            source_region=pair.source_region,
            replica_region=pair.replica_region,
            measured_at=listed_at,
        )
        try:
            objects = self.list_objects(pair.source_region, pair.source_bucket, deadline)
            missing, differ = self.check(pair, deadline)
        except ProviderError as exc:
            report.error = str(exc)
            return report
        report.lag_s, report.oldest_unreplicated = compute_lag(objects, missing, differ, listed_at)
        report.missing, report.differ, report.source_objects = len(missing), len(differ), len(objects)
        return report
