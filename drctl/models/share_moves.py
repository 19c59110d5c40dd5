"""Integer arithmetic of weight moves: split a whole number of weight points in proportion, under caps."""

from __future__ import annotations

import math


def apportion(amount: int, parts: dict[str, float], caps: dict[str, int]) -> dict[str, int]:
    """Split `amount` points in proportion to `parts`, none above its cap (largest remainder).

    What the caps cannot take is not given: the result sums to min(amount, what the caps allow
    among the parts with a positive share). Ties go by name, so the same input gives the same split.
    """
    live = {k: v for k, v in parts.items() if v > 0 and caps.get(k, 0) > 0}
    out = dict.fromkeys(live, 0)
    left = amount
    # Caps bind some parts below their proportional share; their rest is shared among the others.
    while left > 0 and live:
        total = sum(live.values())
        ideal = {k: left * v / total for k, v in live.items()}
        room = {k: caps[k] - out[k] for k in live}
        give = {k: min(room[k], math.floor(ideal[k] + 1e-9)) for k in live}
        rest = left - sum(give.values())
        for k in sorted(live, key=lambda k: (-(ideal[k] - give[k]), k)):
            if rest <= 0:
                break
            if give[k] < room[k]:
                give[k] += 1
                rest -= 1
        if not any(give.values()):
            break
        for k, g in give.items():
            out[k] += g
        left -= sum(give.values())
        live = {k: v for k, v in live.items() if out[k] < caps[k]}
    return {k: v for k, v in out.items() if v > 0}
