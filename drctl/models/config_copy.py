"""Workflow-input models that snapshot a config section field by field."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def copy_fields(model: type[M], section: BaseModel) -> M:
    """A `model` holding the values of the `section` fields of the same names: each of its fields
    must be one of the section's, so a field added to one and not the other fails loudly."""
    return model.model_validate({name: getattr(section, name) for name in model.model_fields})
