"""Errors a user can fix from the command line."""


class ConfigError(ValueError):
    """A bad configuration, found before any model loads. The message names the keys and the fix."""
