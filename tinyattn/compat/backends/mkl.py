"""``torch.backends.mkl``: compat calls no MKL itself (NumPy picks its own BLAS)."""

import contextlib

VERBOSE_OFF, VERBOSE_ON = 0, 1


def is_available():
    return False


@contextlib.contextmanager
def verbose(enable):
    """Torch's MKL verbosity switch: nothing to make verbose here."""
    yield
