"""Optional features and the extras that install them.

A feature that needs an optional package calls `require(...)` at the point of use: when the
package is missing, the user gets one line naming the extra to install, never a traceback.
`MissingExtra` is a UserError, so the CLI's user-error handling (one line, exit code 2) catches it;
stand-alone scripts use `require_or_exit`.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from typedrag.errors import UserError


class MissingExtra(UserError):
    """An optional package is not installed; the message names the extra that brings it."""

    def __init__(self, feature: str, extra: str, reason: str) -> None:
        self.feature, self.extra = feature, extra
        reason = " ".join(reason.split())  # one line, whatever the import error said
        super().__init__(f"{feature} needs the '{extra}' extra: pip install 'typedrag[{extra}]' ({reason})")


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module`, or raise MissingExtra naming `extra` if it (or something it needs) is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtra(feature, extra, str(error) or f"cannot import {module}") from error


def require_or_exit(module: str, extra: str, feature: str) -> ModuleType:
    """`require` for scripts: print the one-line message to stderr and exit with code 2."""
    try:
        return require(module, extra, feature)
    except MissingExtra as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
