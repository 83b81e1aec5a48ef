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


class device(str):
    """``torch.device("cuda:0")``, ``torch.device("cuda", 0)``: the device's name, a ``str`` (so every
    ``device=`` of the library takes it, and ``t.device == "cpu"`` holds), with torch's ``type``, ``index`` and
    ``repr``.

    >>> d = device("cuda", 0)
    >>> d, d.type, d.index, str(d)
    (device(type='cuda', index=0), 'cuda', 0, 'cuda:0')
    """

    def __new__(cls, type, index=None):
        if isinstance(type, device):
            if index is not None:
                raise RuntimeError(f"device(): an index was given twice ({type!r} and {index})")
            return type
        if not isinstance(type, str):
            raise TypeError(f"device(): expected a device name such as 'cpu' or 'cuda:0', got {type!r}")
        name, _, number = type.partition(":")
        if name not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {type}")
        if number:
            if index is not None:
                raise RuntimeError(f"device(): type (string) must not include an index because index was passed "
                                   f"explicitly: {type}")
            if not number.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(number)
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative, got {index!r}")
        made = super().__new__(cls, name if index is None else f"{name}:{index}")
        made._type, made._index = name, index
        return made

    type = property(lambda self: self._type, doc="``'cpu'`` or ``'cuda'``.")
    index = property(lambda self: self._index, doc="The device's index, or ``None`` when none was given.")

    def __repr__(self):
        return f"device(type='{self._type}')" if self._index is None else \
            f"device(type='{self._type}', index={self._index})"

    def __reduce__(self):
        return device, (str(self),)
