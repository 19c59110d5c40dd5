"""Every activity stub in workflows/calls.py names an activity the worker registers, with the same
input and result types: a stub out of step with its activity would fail only in a running workflow
(an activity type nobody serves waits in its queue until schedule-to-start)."""

from __future__ import annotations

import ast
import inspect
import typing
from typing import Any

from temporalio import activity

from drctl.config.schema import FleetConfig
from drctl.worker import registry
from tests.support.config import fleet_config_data
from workflows import calls

Signature = tuple[list[Any], Any]  # input types, result type


def _type(node: ast.expr, namespace: dict[str, Any]) -> Any:
    """The type an expression in calls.py names (`None`: the activity returns nothing)."""
    value = eval(ast.unparse(node), namespace)  # noqa: S307
    return type(None) if value is None else value


def _activity_call(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "_call") or (
        isinstance(f, ast.Attribute) and f.attr in ("execute_activity", "start_activity")
    )


def stubs(source: str, namespace: dict[str, Any]) -> dict[str, tuple[str, Signature]]:
    """Per stub (a function, or a `_platform(...)` or `_read(...)` assignment): the activity type it calls, the
    input type its parameter declares and the result type it asks for."""
    found: dict[str, tuple[str, Signature]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Name) and call.func.id in ("_platform", "_read"):
                name, arg, result, *_ = call.args
                assert isinstance(name, ast.Constant) and isinstance(node.targets[0], ast.Name)
                sig = ([_type(arg, namespace)], _type(result, namespace))
                found[node.targets[0].id] = (name.value, sig)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
            continue
        for call in [c for c in ast.walk(node) if isinstance(c, ast.Call) and _activity_call(c)]:
            name, arg, *rest = call.args
            assert isinstance(name, ast.Constant) and isinstance(name.value, str)
            hints = typing.get_type_hints(namespace[node.name])
            # `None` as the argument: the activity takes no input.
            inputs = [hints[arg.id]] if isinstance(arg, ast.Name) else []
            result = rest[0] if rest else next(k.value for k in call.keywords if k.arg == "result_type")
            found[node.name] = (name.value, (inputs, _type(result, namespace)))
    return found


def registered() -> dict[str, Signature]:
    cfg = FleetConfig.model_validate(fleet_config_data())
    out: dict[str, Signature] = {}
    for fn in registry.activities(cfg):
        d = activity._Definition.must_from_callable(fn)
        assert d.name is not None
        out[d.name] = (list(d.arg_types or []), d.ret_type)
    return out


def mismatches(found: dict[str, tuple[str, Signature]], acts: dict[str, Signature]) -> list[str]:
    problems = []
    for stub, (name, sig) in found.items():
        if name not in acts:
            problems.append(f"{stub}: no registered activity {name!r}")
        elif acts[name] != sig:
            problems.append(f"{stub}: calls {name} as {sig}, but it is {acts[name]}")
    return problems


def test_every_stub_names_a_registered_activity_with_its_types() -> None:
    acts = registered()
    found = stubs(inspect.getsource(calls), vars(calls))
    assert len(found) >= 30  # the parser found the stubs, not nothing
    assert mismatches(found, acts) == []
    # The other way round: every registered activity has a stub (workflows call activities only there).
    assert set(acts) == {name for name, _ in found.values()}


def test_a_stub_out_of_step_is_reported() -> None:
    """The check itself: a wrong result type, a wrong input type and an unknown name each show."""
    source = """
async def get_capacity(inp: RegionRequest, *, queue: str, summary: str) -> Weights:
    return await _call("get_capacity", inp, Weights, summary=summary, queue=queue, seconds=1, retry=R)


async def probe_region(inp: ScaleInput, *, summary: str) -> RegionProbe:
    return await _call("probe_region", inp, RegionProbe, summary=summary, queue=None, seconds=1, retry=R)


renamed = _platform("get_capacity_v2", RegionRequest, Capacity)
"""
    namespace = dict(vars(calls))
    exec(compile(source, "<stubs>", "exec"), namespace)  # noqa: S102
    problems = mismatches(stubs(source, namespace), registered())
    assert len(problems) == 3, problems
    assert problems[0].startswith("get_capacity: calls get_capacity as") and "Weights" in problems[0]
    assert problems[1].startswith("probe_region: calls probe_region as") and "ScaleInput" in problems[1]
    assert problems[2] == "renamed: no registered activity 'get_capacity_v2'"
