"""What the fleet config and the FleetSpec snapshot both answer about their regions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar


class _Region(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def weight(self) -> int: ...


R = TypeVar("R", bound=_Region)


class RegionsByName(Generic[R]):
    """Lookups over a model's `regions` list, in config order."""

    if TYPE_CHECKING:  # a pydantic field of the model this is mixed into
        regions: list[R]

    def find_region(self, name: str) -> R | None:
        return next((r for r in self.regions if r.name == name), None)

    @property
    def region_names(self) -> list[str]:
        return [r.name for r in self.regions]

    @property
    def weights(self) -> dict[str, int]:
        return {r.name: r.weight for r in self.regions}
