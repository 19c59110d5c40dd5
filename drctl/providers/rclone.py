"""rclone as a subprocess: copy or sync one bucket into a replica, check it, measure its lag.

Remotes are defined through rclone's environment configuration (RCLONE_CONFIG_<REMOTE>_<KEY>), so
no config file is written and credentials stay in the subprocess environment: they come from the
environment variables an endpoint names, or boto3's credential chain (session token included, as
temporary keys need it), never from workflow input. Exit codes and log reading: rclone_errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import boto3

from drctl.config.schema import FleetConfig
from drctl.models.rpo import LagReport, ReplicaPair, SourceObject, TransferStats, compute_lag
from drctl.providers import aws, executables
from drctl.providers.errors import ErrorClass, ProviderError
from drctl.providers.rclone_errors import TIMED_OUT, RcloneError, last_error, unanswered

__all__ = ["Rclone", "RcloneError", "parse_stats"]


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
        self._session: boto3.Session | None = None

    # --- environment ------------------------------------------------------------------------------

    def _credentials(self, region: str) -> aws.Keys | None:
        ep = self.cfg.data.endpoint(region)
        if ep.access_key_id_env and ep.secret_access_key_env:
            names = [ep.access_key_id_env, ep.secret_access_key_env, *filter(None, [ep.session_token_env])]
            unset = [n for n in names if not os.environ.get(n)]
            if unset:
                raise ProviderError(
                    ErrorClass(
                        kind="Unauthorized",
                        retryable=False,
                        message=f"data.endpoints.{region}: {' and '.join(unset)} not set",
                    )
                )
            token = os.environ[ep.session_token_env] if ep.session_token_env else None
            return aws.Keys(os.environ[ep.access_key_id_env], os.environ[ep.secret_access_key_env], token)
        # One session per Rclone: botocore refreshes its temporary keys (web identity) in place,
        # instead of a new AssumeRoleWithWebIdentity for every rclone command.
        if self._session is None:
            self._session = boto3.Session()
        keys = aws.resolved_keys(self._session)
        if keys is None and self._endpoint_url(region):
            # A keyless emulator (moto) still needs a signature; same rule as drctl.providers.aws.
            return aws.Keys(
                aws.EMULATOR_KEYS["aws_access_key_id"], aws.EMULATOR_KEYS["aws_secret_access_key"], None
            )
        return keys

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
            keys = self._credentials(region)
            if keys:
                env[prefix + "ACCESS_KEY_ID"], env[prefix + "SECRET_ACCESS_KEY"] = (
                    keys.access_key,
                    keys.secret_key,
                )
                if keys.token:
                    env[prefix + "SESSION_TOKEN"] = keys.token
                env[prefix + "ENV_AUTH"] = "false"
            else:
                # rclone's own chain (the Go SDK's: environment, shared files, web identity, roles).
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
            detail = last_error(lines) if code > 0 else f"killed after {self.timeout_s:g} s"
            raise RcloneError(
                f"{pair.mode} {pair.source_bucket} → {pair.replica_region}/{pair.replica_bucket}",
                code if code > 0 else TIMED_OUT,
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
    ) -> subprocess.CompletedProcess[str]:
        """One rclone command, within `timeout_s` and before `deadline` (time.monotonic()), if given."""
        timeout_s = self.timeout_s if deadline is None else min(self.timeout_s, deadline - time.monotonic())
        if timeout_s <= 0:
            raise RcloneError(action, TIMED_OUT, f"not started: the {self.timeout_s:g} s bound was spent")
        try:
            # Few, short retries: an unreachable store must answer "unknown" within the caller's bound.
            done = subprocess.run(
                [
                    executables.path(executables.RCLONE),
                    *argv,
                    "--use-json-log",
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
            raise RcloneError(action, TIMED_OUT, f"no answer within {timeout_s:g} s") from None
        if done.returncode not in ok_codes:
            raise RcloneError(action, done.returncode, last_error(done.stderr.splitlines()))
        return done

    def check(self, pair: ReplicaPair, deadline: float | None = None) -> tuple[set[str], set[str]]:
        """`rclone check --one-way`: (paths missing in the replica, paths that differ).

        Raises RcloneError when the check could not compare everything, as when the replica
        cannot be listed: rclone then exits 1 too, the code it gives for differences found.
        """
        action = f"check {pair.key}"
        done = self._run(
            action,
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
        for line in done.stdout.splitlines():
            mark, _, path = line.partition(" ")
            if mark == "+":
                missing.add(path)
            elif mark == "*":
                differ.add(path)
            elif mark == "!":
                errors.append(path)
        if done.returncode == 1:
            why = unanswered(done.stderr.splitlines(), len(missing) + len(differ) + len(errors))
            if why is not None:
                raise RcloneError(action, 1, why)
        if errors:
            raise RcloneError(action, 1, f"{len(errors)} object(s) could not be compared: {errors[0]}")
        return missing, differ

    def list_objects(self, region: str, bucket: str, deadline: float | None = None) -> list[SourceObject]:
        """Every object with the time the store received it (S3 LastModified), from one listing.

        --use-server-modtime: without it rclone reads each object's original file mtime (S3
        metadata X-Amz-Meta-Mtime, a HEAD per object), so a week-old file uploaded a second ago
        would read as a week of lag, and a large bucket would cost a request per object
        (--no-mimetype: the MIME type, unused here, costs the same HEAD).
        """
        done = self._run(
            f"list {region}/{bucket}",
            ["lsjson", "-R", "--files-only", "--use-server-modtime", "--no-mimetype", f"src:{bucket}"],
            {"src": region},
            deadline=deadline,
        )
        return [
            SourceObject(path=o["Path"], size=int(o["Size"]), mod_time=datetime.fromisoformat(o["ModTime"]))
            for o in json.loads(done.stdout or "[]")
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
