"""Whether a GPU is here: the one answer ``torch.cuda`` and ``torch.amp`` both give."""

import functools


@functools.lru_cache(maxsize=1)
def device_count():
    """The number of GPUs CuPy sees (0 without CuPy)."""
    try:
        import cupy
    except ImportError:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # CuPy without a driver or a device
        return 0


def is_available():
    return device_count() > 0
