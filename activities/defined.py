"""The activities an activity class defines, for its module's `build`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def activity_methods(acts: object) -> list[Callable[..., Any]]:
    """The bound methods of `acts` that `@activity.defn` marks: a new one is registered with the rest,
    and no list in `build` can leave one out."""
    cls = type(acts)
    # Looked up on the class, so a property is never run just to see what it is.
    return [
        getattr(acts, name)
        for name in dir(cls)
        if hasattr(getattr(cls, name, None), "__temporal_activity_definition")
    ]
