"""The drill classes of the second hostile corpus, generated: each case an experiment and its verdict.

Classes (issue 28's list): 1 rollback starvation (pauses and probe durations that keep the rollbacks
from fitting inside the drill's deadline), 4 checks split between the CLI and the worker (YAML
aliases and merge keys, huge integers, duplicate keys spelled on/yes, the 16 KiB string limit in
JSON), 5 types and headers (argument types and ranges, RFC 9110 header names and values, Host and
hop-by-hop headers). Each case is built from the shipped region outage, so one changed field is
what decides it, and cases on either side of a limit show where the limit is.

`expect` is None for an experiment both paths accept, else a fragment the CLI's refusal holds;
`worker_expect` is the worker's, where it reads the expanded JSON (YAML-only constructs) differently.
The budget figures assume drills.timeout_s 300 (the default): the hypothesis worst case is 50 s
(10 completions of 5 s), the fault 20 s, the wait 32 s, the rollback 20 s.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUTAGE: dict[str, Any] = json.loads((REPO / "experiments" / "region-outage.json").read_text())
GLOBAL = "@GLOBAL@"  # replaced by the test's fleet global endpoint (host:port)


@dataclass(frozen=True)
class Case:
    name: str
    klass: int
    expect: str | None
    doc: dict[str, Any] | None = None
    yaml_text: str | None = None  # a construct only YAML has (alias, merge key, on/yes, hex)
    worker_expect: str | None = None

    @property
    def suffix(self) -> str:
        return ".yaml" if self.yaml_text is not None else ".json"

    def text(self) -> str:
        return self.yaml_text if self.yaml_text is not None else json.dumps(self.doc, indent=1)


def _doc(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = copy.deepcopy(OUTAGE)
    change(doc)
    return doc


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set `value` at a dotted path such as method.0.provider.arguments.count."""

    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        *parents, last = path.split(".")
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


def _both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        for c in changes:
            c(doc)

    return change


def _probe(func: str, arguments: dict[str, Any], name: str = "extra-probe") -> dict[str, Any]:
    return {
        "type": "probe",
        "name": name,
        "provider": {"type": "python", "module": "drctl.chaos.probes", "func": func, "arguments": arguments},
    }


def _http(headers: Any, timeout: float = 5, retries: int = 0) -> dict[str, Any]:
    args = {"url": f"http://{GLOBAL}/health", "timeout": timeout, "max_retries": retries, "headers": headers}
    return _probe("http_request", args, "health-with-headers")


def _http_provider(headers: Any) -> dict[str, Any]:
    provider = {"type": "http", "url": f"http://{GLOBAL}/health", "timeout": 3, "headers": headers}
    return {"type": "probe", "name": "health-over-http", "provider": provider}


def _add(section: str, activity: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc[section].append(activity)


def _replica_fault(count: Any) -> Callable[[dict[str, Any]], None]:
    action = {
        "type": "action",
        "name": "kill-some-replicas",
        "provider": {
            "type": "python",
            "module": "drctl.chaos.actions",
            "func": "kill_replicas",
            "arguments": {"region": "${target_region}", "count": count, "track": "stable"},
        },
    }
    return _set("method.0", action)


ROLLBACK_PAUSE = "rollbacks.0.pauses"
WAIT = "method.1.provider.arguments"
HYPO = "steady-state-hypothesis.probes.0.provider.arguments"


def _class_1() -> list[Case]:
    c = 1
    return [
        # The case: a rollback pause equal to drills.timeout_s, which validation allowed.
        Case(
            "rollback-pause-equals-drill-timeout",
            c,
            "rollbacks[0].pauses.before: the rollbacks may take 320s",
            _doc(_set(ROLLBACK_PAUSE, {"before": 300})),
        ),
        Case("rollback-pause-at-the-budget", c, None, _doc(_set(ROLLBACK_PAUSE, {"before": 30}))),
        Case(
            "rollback-pause-just-over-the-budget",
            c,
            "the rollbacks may take 50.5s, more than the 50s",
            _doc(_set(ROLLBACK_PAUSE, {"before": 30.5})),
        ),
        Case(
            "rollback-pauses-before-and-after",
            c,
            "rollbacks[0].pauses.after: the rollbacks may take 60s",
            _doc(_set(ROLLBACK_PAUSE, {"before": 10, "after": 30})),
        ),
        Case(
            "rollback-http-probe-retry-storm",
            c,
            "rollbacks[1].provider.arguments.timeout: the rollbacks",
            _doc(_add("rollbacks", _http({}, timeout=15, retries=3))),
        ),
        Case(
            "second-rollback-over-the-budget",
            c,
            "the rollbacks may take 55s",
            _doc(_add("rollbacks", _http({}, timeout=35))),
        ),
        # A probe before the rollbacks that waits for minutes: the whole run no longer fits.
        Case(
            "probe-long-wait-before-rollback",
            c,
            "method[1].provider.arguments.within_s: the experiment may take 422s",
            _doc(_set(f"{WAIT}.within_s", 280)),
        ),
        Case(
            "wait-longer-than-the-drill",
            c,
            "within_s: 301 is outside (0, 300]",
            _doc(_set(f"{WAIT}.within_s", 301)),
        ),
        Case(
            "hypothesis-probe-storm",
            c,
            "steady-state-hypothesis.probes[0].provider.arguments.requests",
            _doc(_both(_set(f"{HYPO}.requests", 500), _set(f"{HYPO}.timeout_s", 60))),
        ),
        # 2 x 50 + 20 + 32 + 20 = 172 s: a method pause of 118 s reaches the 290 s budget exactly.
        Case("method-pause-at-the-budget", c, None, _doc(_set("method.0.pauses", {"after": 118}))),
        Case(
            "method-pause-just-over-the-budget",
            c,
            "method[0].pauses.after: the experiment may take 290.5s",
            _doc(_set("method.0.pauses", {"after": 118.5})),
        ),
        Case(
            "pause-bool",
            c,
            "pause before must be 0..300 seconds",
            _doc(_set(ROLLBACK_PAUSE, {"before": True})),
        ),
        Case(
            "pause-negative",
            c,
            "pause before must be 0..300 seconds",
            _doc(_set(ROLLBACK_PAUSE, {"before": -1})),
        ),
        Case(
            "pause-string",
            c,
            "before pause must be a number",
            _doc(_set(ROLLBACK_PAUSE, {"before": "10"})),
        ),
    ]


_FAULT_ANCHOR = """\
method:
  - &fault
    type: action
    name: kill-all
    provider: {type: python, module: drctl.chaos.actions, func: kill_region_replicas,
               arguments: {region: us-west-1, track: stable}}
%s\
steady-state-hypothesis:
  title: served
  probes:
    - type: probe
      name: serves
      provider: {type: python, module: drctl.chaos.probes, func: global_success_ratio,
                 arguments: {requests: 10, timeout_s: 5}}
      tolerance: %s
"""

_TAIL = """\
rollbacks:
  - type: action
    name: clear
    provider: {type: python, module: drctl.chaos.actions, func: clear_faults, arguments: {region: us-west-1}}
title: t
description: d
extensions: [{name: drctl, expect_failover: false}]
configuration: {target_region: us-west-1}
"""


def _yaml(tolerance: str = "{type: range, range: [0.9, 1.0]}", method_extra: str = "", args: str = "") -> str:
    text = _FAULT_ANCHOR % (method_extra, tolerance) + _TAIL
    return text.replace(
        "{region: us-west-1, track: stable}", "{region: us-west-1, track: stable" + args + "}"
    )


_HEX73 = "0x" + "f" * 73


def _class_4() -> list[Case]:
    c = 4
    long_text = "x" * 16_385
    return [
        Case("yaml-plain-is-accepted", c, None, yaml_text=_yaml()),
        Case(
            "yaml-alias-fault-as-tolerance",
            c,
            "YAML alias *fault is not allowed",
            yaml_text=_yaml("*fault"),
            worker_expect="a provider is allowed only in an activity",
        ),
        Case(
            "yaml-merge-fault-into-tolerance",
            c,
            "YAML merge key << is not allowed",
            yaml_text=_yaml("{<<: *fault}"),
            worker_expect="a provider is allowed only in an activity",
        ),
        Case(
            "yaml-merge-inline-into-tolerance",
            c,
            "YAML merge key << is not allowed",
            yaml_text=_yaml("{<<: {type: probe, provider: {type: python}}, range: [0, 1]}"),
            worker_expect="tolerance 'None': python module None is not allowed",
        ),
        Case(
            "hex-integer-73-digits",
            c,
            "an integer beyond ±2^53",
            yaml_text=_yaml(args=f", count: {_HEX73}"),
            worker_expect="a number of more than 40 digits",
        ),
        Case(
            "decimal-integer-beyond-2-53-in-json",
            c,
            "an integer beyond ±2^53",
            _doc(_set("tags", [2**53 + 1])),
        ),
        Case(
            "duplicate-keys-on-and-yes",
            c,
            "key True is not text",
            yaml_text=_yaml(args=", on: 1, yes: 2"),
            worker_expect="argument 'true' is not part of the function signature",
        ),
        Case(
            "key-off-in-arguments",
            c,
            "key False is not text",
            yaml_text=_yaml(args=", off: 1"),
            worker_expect="argument 'false' is not part of the function signature",
        ),
        Case("json-title-at-16-kib", c, None, _doc(_set("title", "x" * 16_384))),
        Case(
            "json-title-over-16-kib",
            c,
            "title: a value longer than 16,384 characters",
            _doc(_set("title", long_text)),
        ),
        Case(
            "json-key-over-16-kib",
            c,
            "a key longer than 16,384 characters",
            _doc(_set("extensions.0", {"name": "drctl", "expect_failover": True, long_text: 1})),
        ),
        Case(
            "json-tag-over-16-kib",
            c,
            "tags[0]: a value longer than 16,384 characters",
            _doc(_set("tags", [long_text])),
        ),
    ]


def _class_5() -> list[Case]:
    c = 5
    cases = [
        Case("count-string", c, "count: must be an integer, not str '2'", _doc(_replica_fault("2"))),
        Case("count-fraction", c, "count: must be an integer, not 1.5", _doc(_replica_fault(1.5))),
        Case("count-bool", c, "count: must be an integer, not bool", _doc(_replica_fault(True))),
        Case("count-zero", c, "count: 0 is outside [1, 1000]", _doc(_replica_fault(0))),
        Case("count-at-the-limit", c, None, _doc(_replica_fault(1000))),
        Case("count-over-the-limit", c, "count: 1001 is outside [1, 1000]", _doc(_replica_fault(1001))),
        Case(
            "requests-string",
            c,
            "requests: must be an integer, not str '10'",
            _doc(_set(f"{HYPO}.requests", "10")),
        ),
        Case(
            "requests-over-the-limit",
            c,
            "requests: 501 is outside [1, 500]",
            _doc(_set(f"{HYPO}.requests", 501)),
        ),
        Case("timeout-zero", c, "timeout_s: 0 is outside (0, 60]", _doc(_set(f"{HYPO}.timeout_s", 0))),
        Case(
            "timeout-bool", c, "timeout_s: must be a number, not bool", _doc(_set(f"{HYPO}.timeout_s", True))
        ),
        Case(
            "unknown-argument",
            c,
            "argument 'force' is not part of the function signature",
            _doc(_set("method.0.provider.arguments.force", True)),
        ),
        Case(
            "missing-argument",
            c,
            "required argument 'region' is missing from activity 'traffic_share'",
            _doc(_add("method", _probe("traffic_share", {"requests": 2, "timeout_s": 1}))),
        ),
        Case(
            "header-name-not-text",
            c,
            "header: must be text",
            _doc(
                _add("method", _probe("traffic_share", {"region": "us-east-1", "requests": 2, "header": 7}))
            ),
        ),
        Case(
            "region-header-with-space",
            c,
            "is not an RFC 9110 header name",
            _doc(
                _add(
                    "method",
                    _probe("traffic_share", {"region": "us-east-1", "requests": 2, "header": "x region"}),
                )
            ),
        ),
        Case(
            "params-nested",
            c,
            "a query parameter value must be text or a number",
            _doc(
                _add(
                    "method",
                    _probe("http_request", {"url": f"http://{GLOBAL}/health", "params": {"a": {"b": 1}}}),
                )
            ),
        ),
        Case("header-plain-is-accepted", c, None, _doc(_add("method", _http({"X-Drill-Run": "weekly\t1"})))),
        Case(
            "http-provider-header-accepted", c, None, _doc(_add("method", _http_provider({"Accept": "*/*"})))
        ),
        Case(
            "headers-not-a-mapping", c, "headers must be a mapping", _doc(_add("method", _http(["Host: x"])))
        ),
        Case(
            "header-value-not-text", c, "a header value must be text", _doc(_add("method", _http({"X-A": 1})))
        ),
    ]
    bad_values = {"crlf": "a\r\nHost: evil", "lf": "a\nb", "cr": "a\rb", "nul": "a\x00b", "esc": "a\x1b[2J"}
    for label, value in bad_values.items():
        cases.append(
            Case(
                f"header-value-{label}",
                c,
                "may not hold CR, LF, NUL",
                _doc(_add("method", _http({"X-A": value}))),
            )
        )
    cases.append(
        Case(
            "http-provider-header-value-crlf",
            c,
            "may not hold CR, LF, NUL",
            _doc(_add("method", _http_provider({"X-A": "a\r\nb"}))),
        )
    )
    for label, name in {"space": "X Drill", "colon": "X:a", "empty": "", "non-ascii": "X-Ä"}.items():
        cases.append(
            Case(
                f"header-name-{label}",
                c,
                "is not an RFC 9110 token",
                _doc(_add("method", _http({name: "1"}))),
            )
        )
    for name in (
        "Host",
        "host",
        "HOST",
        "Connection",
        "Transfer-Encoding",
        "Content-Length",
        "Upgrade",
        "TE",
        "Proxy-Authorization",
        "X-Forwarded-Host",
        "Forwarded",
        "X-HTTP-Method-Override",
    ):
        cases.append(
            Case(
                f"header-{name.lower()}-{len(cases)}",
                c,
                f"{name}: this header may not be set",
                _doc(_add("method", _http({name: "x"}))),
            )
        )
    cases.append(
        Case(
            "http-provider-host-header",
            c,
            "Host: this header may not be set",
            _doc(_add("method", _http_provider({"Host": "other.example"}))),
        )
    )
    return cases


def cases() -> list[Case]:
    return _class_1() + _class_4() + _class_5()
