"""Named factories of one kind (datasets, text encoders, feature extractors): a run spec names one, a team can
register its own, and an unknown name is refused with the list of the known ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """`register(name, factory)`, `names()`, `build(name, **kwargs)` (calls `factory(**kwargs)`) and `factory(name)`.

    `unknown(name, names)` makes the error raised for a name nobody registered; with `guard`, registering a name
    twice is refused unless `overwrite=True` (`guard(message)` makes that error)."""

    def __init__(self, unknown: Callable[[str, list[str]], Exception],
                 factories: dict[str, Callable[..., T]] | None = None, *,
                 guard: Callable[[str], Exception] | None = None) -> None:
        self._factories: dict[str, Callable[..., T]] = dict(factories or {})
        self._unknown = unknown
        self._guard = guard

    def register(self, name: str, factory: Callable[..., T], *, overwrite: bool = False) -> None:
        """Make `build(name, **kwargs)` call `factory(**kwargs)`."""
        if self._guard is not None:
            if not name:
                raise self._guard("the name must be a non-empty string")
            if name in self._factories and not overwrite:
                raise self._guard(f"{name!r} is already registered (pass overwrite=True)")
        self._factories[name] = factory

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._factories)

    def factory(self, name: str) -> Callable[..., T]:
        """The factory registered as `name` (an unknown name raises the registry's error)."""
        try:
            return self._factories[name]
        except KeyError:
            raise self._unknown(name, self.names()) from None

    def build(self, name: str, **kwargs: Any) -> T:
        """What the factory registered as `name` builds from `kwargs`."""
        return self.factory(name)(**kwargs)
