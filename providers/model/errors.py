"""Errors a user can act on: the CLI prints their message as one line."""

from __future__ import annotations


class TokraceError(Exception):
    """An error a user can act on; the CLI prints its message as one line."""


class ConfigError(TokraceError):
    """A tier or config setting is wrong; ``key`` names the setting when one is to blame."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key

