"""The one exception type of the command line."""

from __future__ import annotations


class CliError(Exception):
    """An error worth one clear line on stderr, not a traceback."""
