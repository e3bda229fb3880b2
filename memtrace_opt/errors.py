"""Errors a user can act on. The CLI prints them as one line, with no traceback, and exits with their
`exit_code`: 2 for bad input or usage, 1 for a job that ran and failed, 130 for an interrupted one."""

from __future__ import annotations


class MemtraceError(Exception):
    """Base of every error the CLI reports as a one-line message (exit code 2 unless a subclass says otherwise)."""

    exit_code = 2


class DatasetError(MemtraceError):
    """A dataset file is missing, unreadable or malformed. The message names the file and the record."""


class ConfigError(MemtraceError):
    """A configuration file or flag is invalid."""


class ModelUnavailable(MemtraceError):
    """A model role cannot be served (missing runtime, weights or server). The message says the fix."""


class RunLocked(MemtraceError):
    """Another process holds the run directory (its lock file names the pid and the host)."""


class Interrupted(MemtraceError):
    """The job was interrupted (Ctrl-C); what finished is written and the manifest says so. Exit 130."""

    exit_code = 130
