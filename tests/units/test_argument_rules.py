"""Typed experiment arguments and the document rules, value by value, at each edge of each range,
with the exact refusal each gets (drctl/chaos/arguments.py and document.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from drctl.chaos import actions, probes
from drctl.chaos import arguments as a
from drctl.chaos import document as d


def _refused(func: Any, args: dict[str, Any], timeout_s: float = 300) -> str:
    with pytest.raises(a.ArgumentRefused) as info:
        a.check_arguments("m[0].args", func, args, timeout_s)
    return str(info.value)


def test_a_call_gets_its_defaults_and_never_the_configuration() -> None:
    assert a.check_arguments("w", actions.kill_replicas, {"region": "r"}, 300) == {
        "region": "r",
        "count": 1,
        "track": "stable",
    }
    assert a.check_arguments("w", probes.wait_for_served, {}, 300) == {
        "within_s": 30.0,
        "consecutive": 10,
        "timeout_s": 2.0,
    }
    assert _refused(actions.clear_faults, {"region": "r", "configuration": {}}) == (
        "m[0].args.configuration: not an argument of clear_faults (it takes region, track)"
    )
    assert _refused(actions.clear_faults, {}) == "m[0].args: clear_faults needs argument 'region'"
    assert _refused(actions.kill_gateway, {"region": "r", "x" * 50: 1}) == (
        f"m[0].args.{'x' * 40}: not an argument of kill_gateway (it takes region)"
    )


@pytest.mark.parametrize(
    "value, refusal",
    [
        ("2", "must be an integer, not str '2'"),
        (1.5, "must be an integer, not 1.5"),
        (2.0, "must be an integer, not 2.0"),
        (True, "must be an integer, not bool 'True'"),
        (None, "must be an integer, not NoneType 'None'"),
        (0, "0 is outside [1, 1000]"),
        (-1, "-1 is outside [1, 1000]"),
        (1001, "1001 is outside [1, 1000]"),
        (16**73, f"{str(16**73)[:20]}... ({len(str(16**73))} digits) is outside [1, 1000]"),
    ],
)
def test_count_is_an_integer_in_range(value: Any, refusal: str) -> None:
    assert _refused(actions.kill_replicas, {"region": "r", "count": value}) == f"m[0].args.count: {refusal}"


def test_each_range_admits_its_edges_and_refuses_past_them() -> None:
    ok = [
        (actions.kill_replicas, {"region": "r", "count": 1}),
        (actions.kill_replicas, {"region": "r", "count": 1000}),
        (probes.global_success_ratio, {"requests": 1, "timeout_s": 60}),
        (probes.global_success_ratio, {"requests": 500, "timeout_s": 0.001}),
        (probes.wait_for_served, {"within_s": 300, "consecutive": 1000}),
        (probes.http_request, {"url": "u", "timeout": 60, "max_retries": 0}),
        (probes.http_request, {"url": "u", "timeout": 1, "max_retries": 3}),
        (actions.degrade_region, {"region": "r", "error_rate": 0, "added_latency_ms": 60_000}),
        (actions.degrade_region, {"region": "r", "error_rate": 1, "added_latency_ms": 0}),
    ]
    for func, args in ok:
        a.check_arguments("w", func, args, 300)
    refused = [
        (probes.global_success_ratio, {"requests": 0}, "requests: 0 is outside [1, 500]"),
        (probes.global_success_ratio, {"requests": 501}, "requests: 501 is outside [1, 500]"),
        (probes.global_success_ratio, {"timeout_s": 0}, "timeout_s: 0 is outside (0, 60]"),
        (probes.global_success_ratio, {"timeout_s": 60.5}, "timeout_s: 60.5 is outside (0, 60]"),
        (probes.global_success_ratio, {"timeout_s": -0.5}, "timeout_s: -0.5 is outside (0, 60]"),
        (probes.wait_for_served, {"within_s": 0}, "within_s: 0 is outside (0, 300]"),
        (probes.wait_for_served, {"within_s": 300.5}, "within_s: 300.5 is outside (0, 300]"),
        (probes.wait_for_served, {"consecutive": 0}, "consecutive: 0 is outside [1, 1000]"),
        (probes.wait_for_served, {"consecutive": 1001}, "consecutive: 1001 is outside [1, 1000]"),
        (probes.http_request, {"url": "u", "max_retries": 4}, "max_retries: 4 is outside [0, 3]"),
        (probes.http_request, {"url": "u", "max_retries": -1}, "max_retries: -1 is outside [0, 3]"),
        (probes.http_request, {"url": "u", "timeout": 0}, "timeout: 0 is outside (0, 60]"),
        (probes.http_request, {"url": "u", "timeout": 61}, "timeout: 61 is outside (0, 60]"),
        (actions.degrade_region, {"region": "r", "error_rate": 1.01}, "error_rate: 1.01 is outside [0, 1]"),
        (actions.degrade_region, {"region": "r", "error_rate": -0.1}, "error_rate: -0.1 is outside [0, 1]"),
        (
            actions.degrade_region,
            {"region": "r", "added_latency_ms": 60_001},
            "added_latency_ms: 60001 is outside [0, 60000]",
        ),
    ]
    for func, args, refusal in refused:
        assert _refused(func, args) == f"m[0].args.{refusal}"
    # within_s follows the drill's own timeout.
    a.check_arguments("w", probes.wait_for_served, {"within_s": 45}, 45)
    assert _refused(probes.wait_for_served, {"within_s": 46}, 45) == (
        "m[0].args.within_s: 46 is outside (0, 45]"
    )
    assert a.ranges(45)["within_s"] == (0, 45, False)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_number_is_finite(value: float) -> None:
    assert _refused(probes.global_success_ratio, {"timeout_s": value}) == (
        f"m[0].args.timeout_s: must be a finite number, not {value!r}"
    )


def test_floats_take_ints_but_not_bools_or_text() -> None:
    assert a.check_arguments("w", probes.global_success_ratio, {"timeout_s": 5}, 300)["timeout_s"] == 5
    assert _refused(probes.global_success_ratio, {"timeout_s": False}) == (
        "m[0].args.timeout_s: must be a number, not bool 'False'"
    )
    assert _refused(probes.global_success_ratio, {"timeout_s": "5"}) == (
        "m[0].args.timeout_s: must be a number, not str '5'"
    )


def test_text_arguments_are_short_text() -> None:
    assert _refused(actions.clear_faults, {"region": 7}) == "m[0].args.region: must be text, not int '7'"
    assert _refused(actions.clear_faults, {"region": ["r"]}) == (
        "m[0].args.region: must be text, not list \"['r']\""
    )
    a.check_arguments("w", actions.clear_faults, {"region": "r" * 200}, 300)
    assert _refused(actions.clear_faults, {"region": "r" * 201}) == (
        "m[0].args.region: at most 200 characters, not 201"
    )
    a.check_arguments("w", probes.http_request, {"url": "u" * 2048}, 300)
    assert _refused(probes.http_request, {"url": "u" * 2049}) == (
        "m[0].args.url: at most 2048 characters, not 2049"
    )
    # Optional text takes None; a region header must be an RFC 9110 name.
    a.check_arguments("w", probes.traffic_share, {"region": "r", "header": None}, 300)
    a.check_arguments("w", probes.traffic_share, {"region": "r", "header": "x-served-by"}, 300)
    assert _refused(probes.traffic_share, {"region": "r", "header": "x served"}) == (
        "m[0].args.header: 'x served' is not an RFC 9110 header name"
    )


def test_query_parameters_are_a_flat_mapping_of_scalars() -> None:
    for params in (None, {}, {"a": "x", "b": 1, "c": 1.5, "d": True}):
        a.check_arguments("w", probes.http_request, {"url": "u", "params": params}, 300)
    cases = [
        (["a"], "m[0].args.params: query parameters must be a mapping of name to value"),
        ({"a": [1]}, "m[0].args.params.a: a query parameter value must be text or a number"),
        ({"a": None}, "m[0].args.params.a: a query parameter value must be text or a number"),
        ({"a": math.nan}, "m[0].args.params.a: must be a finite number"),
        ({"k" * 201: 1}, "m[0].args.params: a query parameter name must be short text"),
    ]
    for params, refusal in cases:
        assert _refused(probes.http_request, {"url": "u", "params": params}) == refusal
    a.check_arguments("w", probes.http_request, {"url": "u", "params": {"k" * 200: 1}}, 300)


def test_an_annotation_the_table_does_not_know_is_refused() -> None:
    def odd(x: list[int]) -> None:
        pass

    assert _refused(odd, {"x": [1]}).startswith("m[0].args.x: drctl cannot check an argument of type")


def _header_refusal(headers: Any) -> str:
    with pytest.raises(a.ArgumentRefused) as info:
        a.check_headers("h", headers)
    return str(info.value)


def test_headers_follow_rfc_9110_and_leave_the_host_alone() -> None:
    tchars = "!#$%&'*+-.^_`|~09azAZ"
    good = {tchars: "v", "X-Drill": "a\tb ~\x80é", "A": "", "x" * 100: "v" * 4096}
    assert a.check_headers("h", good) == good
    assert a.check_headers("h", None) == {}
    assert a.check_headers("h", {f"X-{i}": "v" for i in range(32)})
    assert _header_refusal({f"X-{i}": "v" for i in range(33)}) == "h: at most 32 headers, not 33"
    assert _header_refusal([("Host", "x")]) == "h: headers must be a mapping of name to value"
    for name in ("", "X Y", "X:Y", "X\r\nY", "Ä", "(x)", "x" * 101, 7):
        assert _header_refusal({name: "v"}) == (
            f"h: header name {str(name)[:40]!r} is not an RFC 9110 token "
            "(letters, digits and !#$%&'*+-.^_`|~ only)"
        )
    for name in sorted(a.NOT_SETTABLE):
        for spelled in (name, name.upper(), name.title()):
            assert _header_refusal({spelled: "x"}) == (
                f"h.{spelled}: this header may not be set by an experiment (it picks the host or "
                "controls the connection; the checked URL says where the probe goes)"
            )
    assert {"host", "connection", "transfer-encoding", "te", "upgrade", "content-length"} <= a.NOT_SETTABLE
    for value in ("a\rb", "a\nb", "a\x00b", "a\x1bb", "a\x7fb", "a\x08b", "a\x0bb", "a\x1fb"):
        assert _header_refusal({"X-A": value}) == (
            "h.X-A: a header value may not hold CR, LF, NUL or other control characters and is at most "
            "4096 characters"
        )
    assert _header_refusal({"X-A": "v" * 4097}).startswith("h.X-A: a header value may not hold")
    assert _header_refusal({"X-A": 1}) == "h.X-A: a header value must be text, not int"
    assert _header_refusal({"X-A": None}) == "h.X-A: a header value must be text, not NoneType"


def test_http_request_headers_go_through_the_header_rules() -> None:
    a.check_arguments("w", probes.http_request, {"url": "u", "headers": {"Accept": "*/*"}}, 300)
    assert _refused(probes.http_request, {"url": "u", "headers": {"Host": "x"}}).startswith(
        "m[0].args.headers.Host: this header may not be set"
    )


# --- the document rules -----------------------------------------------------------------------


def _doc_refusal(doc: Any) -> str:
    with pytest.raises(d.DocumentRefused) as info:
        d.check_document(doc)
    return str(info.value)


def test_keys_are_text_everywhere() -> None:
    d.check_document({"a": [{"b": {"c": 1}}]})
    assert _doc_refusal({True: 1}) == (
        "(top level): key True is not text (YAML reads on/off/yes/no/y/n as booleans, and two such keys "
        "as one): quote it"
    )
    assert _doc_refusal({"a": [{"b": {None: 1}}]}).startswith("a[0].b: key None is not text")
    assert _doc_refusal({"a": {1: 1}}).startswith("a: key 1 is not text")


def test_strings_and_integers_are_bounded_in_every_format() -> None:
    edge = "x" * d.MAX_TEXT
    d.check_document({edge: [edge], "n": [d.MAX_INT, -d.MAX_INT, 1.5e300, True]})
    assert d.MAX_TEXT == 16_384 and d.MAX_INT == 2**53
    assert _doc_refusal({"t": edge + "x"}) == "t: a value longer than 16,384 characters (16,385)"
    assert _doc_refusal([edge + "x"]) == "(top level)[0]: a value longer than 16,384 characters (16,385)"
    assert _doc_refusal({"a": {edge + "x": 1}}) == "a: a key longer than 16,384 characters (16,385)"
    assert _doc_refusal({"n": d.MAX_INT + 1}) == "n: an integer beyond ±2^53 (16 digits)"
    assert _doc_refusal({"n": [-(d.MAX_INT + 1)]}) == "n[0]: an integer beyond ±2^53 (16 digits)"
    assert _doc_refusal({"n": 16**73}) == f"n: an integer beyond ±2^53 ({len(str(16**73))} digits)"
    # A path is built from at most 40 characters of each key.
    assert (
        _doc_refusal({"k" * 60: {"v": d.MAX_INT + 1}}) == f"{'k' * 40}.v: an integer beyond ±2^53 (16 digits)"
    )


def test_yaml_aliases_and_merge_keys_are_refused_with_their_line() -> None:
    d.check_yaml_references("a: &x 1\nb: '<<'\nc: {'<<': 1}\n")  # an anchor alone, a quoted <<
    assert _refusal_yaml("a: &x 1\nb: *x\n") == (
        "line 2: YAML alias *x is not allowed in an experiment: write each activity and value out where "
        "it is used"
    )
    assert _refusal_yaml("a: {b: 1}\nc:\n  <<: {d: 1}\n") == (
        "line 3: YAML merge key << is not allowed in an experiment: write the keys out"
    )
    assert _refusal_yaml("c: {!!merge x: {d: 1}}\n").startswith("line 1: YAML merge key << is not allowed")


def _refusal_yaml(text: str) -> str:
    with pytest.raises(d.DocumentRefused) as info:
        d.check_yaml_references(text)
    return str(info.value)
