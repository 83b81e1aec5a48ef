"""``torch.optim``: the native optimizers (which follow PyTorch's updates and parameter groups) with
torch's signatures, refusing what they do not implement (``amsgrad``, ``maximize``, ``dampening``,
CUDA's ``fused`` kernels) instead of ignoring it, and refusing a step over integer parameters as
torch does (a ``RuntimeError``; ``NotImplementedError``, a kind of it, from Adam and AdamW).

>>> import tinyattn.compat as torch
>>> import inspect
>>> "fused" in inspect.signature(torch.optim.AdamW).parameters        # nanoGPT's test
True
>>> torch.optim.AdamW([torch.nn.Parameter(torch.ones(1))], fused=True)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
RuntimeError: AdamW(fused=True): fused optimizers are CUDA kernels, which tinyattn.compat does not have; ...
"""

from ...optim import SGD as _SGD
from ...optim import Adam as _Adam
from ...optim import AdamW as _AdamW
from ...optim import Optimizer
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]


def _refuse(name, fused=None, **unsupported):
    if fused:
        raise RuntimeError(f"{name}(fused=True): fused optimizers are CUDA kernels, which tinyattn.compat does "
                           "not have; leave fused unset")
    for option, (value, default) in unsupported.items():
        if value != default:
            raise NotImplementedError(f"{name}({option}={value!r}) is not supported by tinyattn.compat; "
                                      f"only {option}={default!r}")


def _floating_parameters_only(optimizer, error):
    """Refuse, before any update, a parameter with a gradient whose dtype is not floating point."""
    for g, group in enumerate(optimizer.param_groups):
        for i, p in enumerate(group["params"]):
            if p._grad is not None and p._data.dtype.kind not in "fc":
                raise error(f"{type(optimizer).__name__}.step: parameter {i} of group {g} has dtype "
                            f"{p._data.dtype} (its gradient {p._grad.dtype}); optimizers update floating-point "
                            "parameters only: create it with a float dtype (torch.float32)")


class SGD(_SGD):
    """``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
    foreach=None, differentiable=False, fused=None)``."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        _refuse("SGD", fused, dampening=(dampening, 0), maximize=(maximize, False),
                differentiable=(differentiable, False))
        super().__init__(params, lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)

    def step(self, closure=None):
        _floating_parameters_only(self, RuntimeError)
        return super().step(closure)


class Adam(_Adam):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, foreach=None,
    maximize=False, capturable=False, differentiable=False, fused=None, decoupled_weight_decay=False)``
    (``decoupled_weight_decay=True`` is ``AdamW``: use that)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _refuse("Adam", fused, amsgrad=(amsgrad, False), maximize=(maximize, False),
                capturable=(capturable, False), differentiable=(differentiable, False),
                decoupled_weight_decay=(decoupled_weight_decay, False))
        super().__init__(params, lr, betas=betas, eps=eps, weight_decay=weight_decay)

    def step(self, closure=None):
        _floating_parameters_only(self, NotImplementedError)
        return super().step(closure)


class AdamW(_AdamW):
    """``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *, maximize=False,
    foreach=None, capturable=False, differentiable=False, fused=None)``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        _refuse("AdamW", fused, amsgrad=(amsgrad, False), maximize=(maximize, False),
                capturable=(capturable, False), differentiable=(differentiable, False))
        super().__init__(params, lr, betas=betas, eps=eps, weight_decay=weight_decay)

    def step(self, closure=None):
        _floating_parameters_only(self, NotImplementedError)
        return super().step(closure)


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.optim has no `{name}` yet")
