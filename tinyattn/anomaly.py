"""Floor 1: anomaly detection (PyTorch's ``torch.autograd.detect_anomaly``), a mode of the calling thread.

While it is on, ``Function.apply`` keeps in each node the line of user code that recorded it (``user_frame``), and
the graph walk checks every gradient a node gives (``check_finite``).
"""

import functools
import traceback

from . import backend, modes


class detect_anomaly:
    """Context manager and decorator (PyTorch's ``torch.autograd.detect_anomaly``): each node recorded
    inside remembers the line of user code that created it, and a backward that produces NaN raises a
    ``RuntimeError`` naming the node's forward operation and that line. ``check_nan=False`` keeps the
    lines without the check. Slow: for finding a bug, not for training.

    >>> import tinyattn as ta
    >>> x = ta.tensor([0.0, 1.0], requires_grad=True)
    >>> with ta.autograd.detect_anomaly():
    ...     y = x.sqrt()                                  # d sqrt(x)/dx at 0 is inf; times 0 it is NaN
    ...     y.backward(ta.tensor([0.0, 1.0]))             # doctest: +ELLIPSIS
    Traceback (most recent call last):
    RuntimeError: Function SqrtBackward returned nan values in its 0th output; the forward operation Sqrt ...
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._previous = modes.change(anomaly=True if self.check_nan else "lines")

    def __exit__(self, *exc):
        modes.change(**self._previous)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly(detect_anomaly):
    """``set_detect_anomaly(mode, check_nan=True)``: anomaly detection on or off from now on; as a context
    manager the previous setting comes back on exit.

    Args:
        mode: ``True`` to turn anomaly detection on, ``False`` to turn it off.
        check_nan: with ``mode``, whether a backward that produces NaN raises (``False`` keeps only the lines).

    >>> import tinyattn as ta
    >>> with ta.autograd.set_detect_anomaly(True):
    ...     print(ta.autograd.is_anomaly_enabled())
    True
    >>> ta.autograd.is_anomaly_enabled()
    False
    """

    def __init__(self, mode, check_nan=True):
        self.check_nan = check_nan
        self._previous = modes.change(anomaly=(True if check_nan else "lines") if mode else False)

    def __enter__(self):
        pass


def is_anomaly_enabled():
    """Whether anomaly detection (``detect_anomaly``, ``set_detect_anomaly``) is on in the calling thread.

    >>> import tinyattn as ta
    >>> ta.autograd.is_anomaly_enabled()
    False
    >>> with ta.autograd.detect_anomaly():
    ...     print(ta.autograd.is_anomaly_enabled())
    True
    """
    return bool(modes.current().anomaly)


def user_frame():
    """Where the user's code created a node: the innermost frame outside the library, as ``file:line``."""
    library = __file__.rsplit("/", 1)[0]
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not frame.filename.startswith(library):
            return f'File "{frame.filename}", line {frame.lineno}, in {frame.name}\n    {frame.line}'
    return "(no frame outside the library)"


def check_finite(fn, grads):
    """Raise, naming ``fn``'s forward operation and the line that recorded it, if a gradient it gave holds a NaN."""
    xp = None
    for i, g in enumerate(grads):
        if g is None:
            continue
        array = g if backend.is_array(g) else g._data  # (a tensor under create_graph)
        xp = xp or backend.namespace(array)
        if array.dtype.kind in "fc" and bool(xp.isnan(array).any()):
            where = fn.__dict__.get("_created_at", "(the node was recorded before anomaly detection was on)")
            raise RuntimeError(f"Function {type(fn).__name__}Backward returned nan values in its {i}th output; "
                               f"the forward operation {type(fn).__name__} was created at:\n{where}")
