"""Validation of requested traffic weights, shared by every traffic provider.

Providers check a whole request before touching anything, so a bad key or value never leaves a
half-applied weight set behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def validate_weights(
    weights: Mapping[str, int],
    known: Iterable[str],
    *,
    max_weight: int,
    what: str,
    current: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Check keys and values; return the weights as a plain dict.

    Args:
        weights: requested weights by key (region or track); keys left out keep their weight.
        known: the keys that exist.
        max_weight: largest accepted weight (HAProxy 256, Route 53 255).
        what: "region" or "track", for error messages.
        current: weights in force now, to reject a partial request that would leave every key at 0;
            without it, only a complete request is checked for being all zero.

    Raises:
        ValueError: naming the first bad key, or when the result would send traffic nowhere.
    """
    known = list(known)
    if not weights:
        raise ValueError(f"no {what} weights given")
    for key, w in weights.items():
        if key not in known:
            raise ValueError(f"unknown {what} {key!r}; known: {', '.join(known)}")
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= max_weight:
            raise ValueError(f"{what} {key!r}: weight must be an integer 0..{max_weight}, got {w!r}")
    if current is None and set(weights) != set(known):
        return dict(weights)  # partial request: the caller re-checks against the current weights
    merged = {**(current or {}), **weights}
    if all(w == 0 for w in merged.values()):
        raise ValueError(f"{what} weights are all zero: {dict(weights)}; traffic would have nowhere to go")
    return dict(weights)
