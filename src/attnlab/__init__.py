"""attnlab: attention, the mechanism at the heart of every Transformer, step by step and fast."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attnlab")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = ["__version__"]
