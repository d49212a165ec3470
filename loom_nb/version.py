"""The package version (one home: the package root and the trace spans read it)."""

__version__ = "0.1.0"
