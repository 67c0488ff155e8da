"""The package version, in one place (the record names it; pyproject.toml repeats it)."""

__version__ = "0.1.0"
