"""Errors a user can act on. The CLI prints them as one line and exits 2, with no traceback."""

from __future__ import annotations


class MemtraceError(Exception):
    """Base of every error the CLI reports as a one-line message (exit code 2)."""

    exit_code = 2


class DatasetError(MemtraceError):
    """A dataset file is missing, unreadable or malformed. The message names the file and the record."""


class ConfigError(MemtraceError):
    """A configuration file or flag is invalid."""


class ModelUnavailable(MemtraceError):
    """A model role cannot be served (missing runtime, weights or server). The message says the fix."""
