"""Listeners on what telemetry sees (the service's Prometheus metrics): `listen(event, listener)`."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

# ---------------------------------------------------------------- listeners (the service's metrics)


_listeners: dict[str, list[Callable[[], Callable[..., None] | None]]] = {}


def listen(event: str, listener: Callable[..., None]) -> Callable[[], None]:
    """Call `listener(**fields)` on each `event` ("llm_call", "abstention"); returns what stops it. A bound
    method is held weakly: an app that never ran its shutdown does not keep its pipeline alive through it."""
    held = weakref.WeakMethod(listener) if inspect.ismethod(listener) else (lambda: listener)
    _listeners.setdefault(event, []).append(held)

    def stop() -> None:
        if held in _listeners.get(event, []):
            _listeners[event].remove(held)

    return stop


def _tell(event: str, **fields: Any) -> None:
    held = _listeners.get(event)
    if not held:
        return
    for reference in list(held):
        listener = reference()
        if listener is None:  # its owner is gone
            held.remove(reference)
            continue
        try:
            listener(**fields)
        except Exception:  # a broken metric must never break an answer
            pass
