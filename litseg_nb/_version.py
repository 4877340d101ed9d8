"""The package version (its own module, so low modules such as the cache read it without importing the package)."""
__version__ = "0.1.0"
