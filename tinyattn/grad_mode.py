"""Floor 1: the grad modes, PyTorch's context managers and decorators: ``no_grad``, ``enable_grad``,
``set_grad_enabled`` and ``inference_mode``.

Each sets a field of the calling thread's modes (``tinyattn.modes``) and puts back, on exit, what it found: one
thread's ``no_grad`` is never another's. ``Function.apply`` reads the mode once per operation. As a decorator each
runs the function in its mode (``decorated``), and a generator function's body in its mode at every step.
"""

import functools
import inspect

from . import modes


def decorated(fn, context):
    """``fn`` run inside ``context()`` (a new context manager per call). For a generator function (or a
    generator-based coroutine driven by ``send``), each resumption runs inside it, as in PyTorch: the body
    sees the mode at every step, and the caller gets its own mode back at every ``yield``."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)  # (made, not yet run)
            resume, value = gen.send, None  # (first: send(None), which is next())
            while True:
                try:
                    with context():
                        item = resume(value)
                except StopIteration as stop:
                    return stop.value
                try:
                    value, resume = (yield item), gen.send
                except GeneratorExit:  # closed by the caller: closed here too, in the mode
                    with context():
                        gen.close()
                    raise
                except BaseException as error:  # thrown in by the caller: thrown into fn's body
                    value, resume = error, gen.throw
        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with context():
            return fn(*args, **kwargs)
    return wrapper


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
        return decorated(fn, no_grad)


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
        return decorated(fn, enable_grad)


def is_grad_enabled():
    """Whether operations record a graph here (false inside ``no_grad`` and ``inference_mode``).

    >>> import tinyattn as ta
    >>> with ta.no_grad():
    ...     print(ta.is_grad_enabled())
    False
    >>> ta.is_grad_enabled()
    True
    """
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
        return decorated(fn, lambda: set_grad_enabled(mode))


class inference_mode(no_grad):
    """``inference_mode(mode=True)``: PyTorch's context manager and decorator for inference. Here it is
    ``no_grad`` with ``is_inference_mode_enabled()`` true (the engine has no tensors that could be cheaper than
    those ``no_grad`` makes); ``inference_mode(False)`` turns it off inside, gradients on, even inside
    ``inference_mode()``, as in PyTorch.

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

    def __enter__(self):  # (``mode=False`` turns it off inside, and gradients on, as PyTorch does)
        self._previous = modes.change(grad_enabled=not self.mode, inference=self.mode)

    def __exit__(self, *exc):
        modes.change(**self._previous)

    def __call__(self, fn):
        mode = self.mode
        return decorated(fn, lambda: inference_mode(mode))


def is_inference_mode_enabled():
    """Whether an ``inference_mode`` block is active here.

    >>> import tinyattn as ta
    >>> with ta.inference_mode():
    ...     print(ta.is_inference_mode_enabled())
    True
    >>> ta.is_inference_mode_enabled()
    False
    """
    return modes.current().inference
