"""The ``cpa`` command line."""

from cpa_core.cli.main import main

__all__ = ["main"]
