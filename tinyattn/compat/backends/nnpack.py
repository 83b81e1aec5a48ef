"""``torch.backends.nnpack``: flags only (compat runs no NNPACK kernels)."""

import contextlib

enabled = False


def is_available():
    return False


def set_flags(_enabled):
    """Set the flag; returns the previous one as a tuple, as torch's does."""
    global enabled
    previous, enabled = (enabled,), bool(_enabled)
    return previous


@contextlib.contextmanager
def flags(enabled=False):
    (previous,) = set_flags(enabled)
    try:
        yield
    finally:
        set_flags(previous)
