"""Floor 1: the grad modes, PyTorch's context managers and decorators: ``no_grad``, ``enable_grad``,
``set_grad_enabled`` and ``inference_mode``.

Each sets a field of the calling thread's modes (``tinyattn.modes``) and puts back, on exit, what it found: one
thread's ``no_grad`` is never another's. ``Function.apply`` reads the mode once per operation.
"""

from . import modes


class no_grad:
    """Context manager and decorator: no graph is recorded inside.

    >>> import tinyattn as ta
    >>> w = ta.ones(2, requires_grad=True)
    >>> with ta.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    def __new__(cls, fn=None):
        if fn is not None:  # used bare, as ``@no_grad``
            return cls()(fn)
        return super().__new__(cls)

    def __enter__(self):
        self._previous = modes.change(grad_enabled=False)  # (this thread's mode: ``tinyattn.modes``)

    def __exit__(self, *exc):
        modes.change(**self._previous)

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper


class enable_grad(no_grad):
    """Context manager and decorator: record the graph again, inside a ``no_grad`` block.

    >>> import tinyattn as ta
    >>> w = ta.ones(2, requires_grad=True)
    >>> with ta.no_grad(), ta.enable_grad():
    ...     y = w * 2
    >>> y.requires_grad
    True
    """

    def __enter__(self):
        self._previous = modes.change(grad_enabled=True)

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with enable_grad():
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper


def is_grad_enabled():
    return modes.current().grad_enabled


class set_grad_enabled(no_grad):
    """``set_grad_enabled(mode)``: record the graph or not, from now on; used as a context manager or a
    decorator, the previous mode comes back on exit (PyTorch's ``torch.set_grad_enabled``).

    >>> import tinyattn as ta
    >>> w = ta.ones(2, requires_grad=True)
    >>> with ta.set_grad_enabled(False):
    ...     (w * 2).requires_grad
    False
    """

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode):
        self.mode = bool(mode)
        self._previous = modes.change(grad_enabled=self.mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        modes.change(**self._previous)

    def __call__(self, fn):
        mode = self.mode
        modes.change(**self._previous)  # as a decorator it changes nothing until ``fn`` runs

        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper


class inference_mode(no_grad):
    """``inference_mode(mode=True)``: PyTorch's context manager and decorator for inference. Here it is
    ``no_grad`` (``mode=False``: ``enable_grad``'s opposite, nothing changes): the engine has no
    tensors that could be cheaper than those ``no_grad`` makes.

    >>> import tinyattn as ta
    >>> with ta.inference_mode():
    ...     ta.is_inference_mode_enabled(), (ta.ones(2, requires_grad=True) * 2).requires_grad
    (True, False)
    """

    def __new__(cls, mode=True):
        if callable(mode):  # used bare, as ``@inference_mode``
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self._previous = modes.change(grad_enabled=False, inference=True) if self.mode else {}

    def __exit__(self, *exc):
        modes.change(**self._previous)

    def __call__(self, fn):
        mode = self.mode

        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper



def is_inference_mode_enabled():
    return modes.current().inference
