"""The version, in one place: read by the package, the stamp and the build."""

__version__ = "0.7.20"
