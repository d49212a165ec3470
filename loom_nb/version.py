"""The package version (one home: the package root and the trace spans read it)."""

#: This release's version (the one in pyproject.toml).
__version__ = "0.1.0"
