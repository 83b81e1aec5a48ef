"""``torch.autograd.grad_mode``: the grad-mode context managers, where some scripts import them from, and torch's
switches of its multithreaded backward and of its gradients' layout, which change nothing here."""

import contextlib

from ...engine import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "set_multithreading_enabled",
           "enforce_grad_layout_policy"]


class set_multithreading_enabled(contextlib.ContextDecorator):
    """torch's switch of the multithreaded backward; the walk here runs on the calling thread either way."""

    def __init__(self, mode):
        self.mode = bool(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class enforce_grad_layout_policy(set_multithreading_enabled):
    """torch's switch of the gradients' stride layout; gradients here are arrays of the parameter's own layout."""

    def __init__(self, enable=True):
        super().__init__(enable)
