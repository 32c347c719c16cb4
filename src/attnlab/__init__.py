"""attnlab: attention, the mechanism at the heart of every Transformer, step by step and fast."""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``attnlab.__version__``, read from the installed metadata when first asked for: importing attnlab stays
    instant (``importlib.metadata`` takes a while), which lets the command line answer Ctrl-C from the start."""
    if name != "__version__":
        raise AttributeError(f"module 'attnlab' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attnlab")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"
