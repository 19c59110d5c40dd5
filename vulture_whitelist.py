"""Names vulture cannot see a caller for, and why each is reached. Parsed by vulture, never run.

`make lint` runs vulture over drctl, workflows, activities and bench with this file (see
[tool.vulture] in pyproject.toml). Add a name here only with the way it is reached.
"""

# ruff: noqa
_ = object()

# Chaos Toolkit calls drill probes by module and function name from the experiment's JSON
# (drctl/chaos/boundary.py admits exactly the public functions of drctl.chaos.probes/actions).
global_success_ratio
traffic_share
wait_for_traffic_moved
wait_for_served
region_state
http_request  # what an experiment's http provider runs (boundary.as_run)

# Result and state fields: serialized into workflow results, the Temporal UI, `--output json` and
# drill reports. Users (and tests) read them; no product code needs to.
_.auth_rejected  # VerifyResult
_.steady_state_before_met  # JournalVerdict
_.steady_state_after_met
_.failover_rto_s  # DrillReport
_.last_failing_fraction  # RegionTracker
_.last_probed_at
_.weights_applied_at  # FailoverResult
_.rto_upper_bound_s
_.released_at  # FailoverResult: when it gave the fleet back (done for the fleet)
_.superseded_by  # FailoverResult: the operation that ended its objective watch
_.held_s  # SloJudgement (its evidence line says the same in words)
_.active_failover  # MonitorState
_.last_failover  # MonitorState, copied into MonitorStatus by name (MonitorStatus.of)
_.last_failback
_.capacity_ok  # FailoverPlan
_.target_share_after
_.passive_reads  # WatchCounts: in the watcher's heartbeat and result (tests and the UI read them)
_.resumed
_.models_ok  # RegionProbe / TargetProbe
_.queue_depth
_.kv_cache_usage
_.probed_at
_.by_workflow_id  # PreemptNotice, the lock's signal to a maintenance holder (in the history)
_.by_operation
_.decommissioned  # MigrationResult
_.artifacts
_.deletes  # replication runs
_.elapsed_s
_.measured_lag_s
_.forced
_.accepted  # the upgrade's analysis verdicts
_.age_s  # LastBackup, shown by `drctl data status`
_.initial_weight  # HAProxy `show servers state`, parsed in full for operators and tests
_.operational
_.admin_maint
_.draining
_.check_result
BLUE_GREEN  # Strategy enum member, reached from the config's `strategy: blue-green`

# Attributes a library reads: rich's Table.caption, logging's LogRecord fields and temporalio's
# logger switches, the kubernetes client's Configuration.retries.
_.caption
_.workflow_type
_.activity_info_on_message
_.workflow_info_on_message
_.retries

# temporalio calls these on a payload converter and a worker interceptor (drctl/client/plaintext.py).
_.encoding
_.to_payload
_.from_payload
type_hint
_.intercept_activity

# The dev stack's admin API dispatches an action by name (`getattr(gateway, body.action)`).
_.freeze
_.thaw

# Dev-stack and runtime-client operations the test suite drives (worker kills, Temporal restarts,
# one server's weight in the fixtures); the product reaches them through the plural forms.
start_worker
restart_temporal
_.set_weight

# bench/: figures the benchmark scripts write into their JSON reports, and the old prober
# (bench/probe_baseline.py) kept for the comparison.
_.shift_s
_.workflow_rto_s
exposure_objects
_.max_duration_s

# Typer's eager --version option: its callback prints and exits; the parameter is never read.
version_

# click calls these on the CLI's top-level group (drctl/cli/main.py LazyGroup) to list and resolve commands.
_.list_commands
_.get_command

# kmock's KubernetesEmulator registers self._serve_watch as its watch fallback; the dev stack's
# cluster overrides it to honour selectors, resourceVersion and timeoutSeconds.
_._serve_watch

# The registry of executables the image must carry (drctl/providers/executables.py): read by
# tests/test_worker_image.py, which checks the Dockerfile and the worker lock against it.
BINARIES
PYTHON_MODULES
_.distribution  # PythonModule

# http.server reads close_connection after a handler returns: a refused request's unread body must
# not be parsed as the next request (drctl/client/codec_server.py).
_.close_connection

# The capacity model's face to the monitor (issue 20): the monitor's rebalance (workflows/monitor*.py,
# built on branch rebalance) calls these and reads these settings; until it merges only tests do.
# Remove each line once the monitor reaches the name.
plan_rebalance
fleet_capacities
_.sustained  # BreachState
_.moves  # RebalancePlan, for the decision log
_.rebalance  # failover.rebalance
_.return_step_interval_s  # failover.rebalance_limits
# Serialized into the decision log and the workflow's details; operators read them.
_.evidence  # RegionCapacity
_.moved_pct  # RebalancePlan

# drctl/cli/operation.py: the signature and annotations Typer reads off a command with RunOptions.
_.__signature__
_.__annotations__

# drctl/models/gitops.py: the fields drctl writes per kind, which tests/test_gitops.py keeps
# docs/gitops.md's table and the example Argo CD and Flux ignore entries equal to.
OWNED

# drctl/client/codec_http.py: asyncio calls a protocol's eof_received; logging reads a record's
# levelno; the CLI and tests read server_address (http.server's name for it).
_.eof_received
_.levelno
_.server_address

# The decision core's settings from a fleet's spec: the monitor's wiring to drctl.decision (issue 26,
# the step after the core) calls it; tests/decision/test_config.py runs it now.
_.from_spec  # DecisionConfig
