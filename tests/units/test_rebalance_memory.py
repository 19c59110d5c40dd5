"""What the monitor's rebalance remembers: only its own moves return, and never over another operation's."""

from __future__ import annotations

from drctl.models.rebalance import RebalanceMemory


def test_a_return_heads_for_the_weights_before_the_rebalance_moved_them() -> None:
    mem = RebalanceMemory()
    home, forgot = mem.home({"a": 60, "b": 40})
    assert (home, forgot) == ({"a": 60, "b": 40}, None)
    mem.applied({"a": 60, "b": 40}, {"a": 50, "b": 50})
    mem.applied({"a": 50, "b": 50}, {"a": 42, "b": 58})
    assert mem.moved == {"a": -18, "b": 18}
    assert mem.home({"a": 42, "b": 58}) == ({"a": 60, "b": 40}, None)
    mem.applied({"a": 42, "b": 58}, {"a": 60, "b": 40})  # all returned: nothing left to return
    assert mem.moved == {} and mem.home({"a": 60, "b": 40}) == ({"a": 60, "b": 40}, None)


def test_weights_moved_by_another_operation_are_taken_as_they_are() -> None:
    mem = RebalanceMemory()
    mem.applied({"a": 60, "b": 40}, {"a": 50, "b": 50})
    # A failover (or an operator) moved everything to b since: the rebalance must not undo it.
    home, forgot = mem.home({"a": 0, "b": 100})
    assert home == {"a": 0, "b": 100} and forgot is not None and "another operation" in forgot
    assert mem.moved == {} and mem.last_set is None
    assert mem.home({"a": 0, "b": 100}) == ({"a": 0, "b": 100}, None)  # forgotten once, not every tick


def test_the_memory_survives_continue_as_new() -> None:
    mem = RebalanceMemory()
    mem.applied({"a": 60, "b": 40}, {"a": 45, "b": 55})
    back = RebalanceMemory.model_validate_json(mem.model_dump_json())
    assert back.home({"a": 45, "b": 55}) == ({"a": 60, "b": 40}, None)
