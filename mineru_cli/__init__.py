"""mineru-cli: batch document parsing on plain CPUs."""

__version__ = "0.1.0"
