"""``torch.optim``: the native optimizers (which follow PyTorch's updates and parameter groups) with
torch's signatures, refusing what they do not implement (``amsgrad``, ``maximize`` where the native
optimizer has none, ``dampening``, ``capturable`` and ``differentiable``, CUDA's ``fused`` kernels)
instead of ignoring it, and refusing a step over integer parameters as torch does (a ``RuntimeError``;
``NotImplementedError``, a kind of it, from Adam and AdamW). ``foreach`` chooses among torch's
implementations of one update and changes nothing here. ``SparseAdam`` is refused: tensors here are
dense.

>>> import tinyattn.compat as torch
>>> import inspect
>>> "fused" in inspect.signature(torch.optim.AdamW).parameters        # nanoGPT's test
True
>>> torch.optim.AdamW([torch.nn.Parameter(torch.ones(1))], fused=True)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
RuntimeError: AdamW(fused=True): fused optimizers are CUDA kernels, which tinyattn.compat does not have; ...
"""

from ... import optim as _native
from ...optim import LBFGS, Muon, Optimizer, swap_in_optimizer_params_and_state
from ..refusals import refused
from ..scope import missing
from . import lr_scheduler, swa_utils

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta", "RMSprop", "Rprop",
           "ASGD", "Adafactor", "Muon", "LBFGS", "SparseAdam", "swap_in_optimizer_params_and_state", "lr_scheduler",
           "swa_utils"]

SparseAdam = refused("torch.optim.SparseAdam", "tensors here are dense and gradients are dense; use torch.optim.Adam "
                     "(the same update on every coordinate)")


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


class SGD(_native.SGD):
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


class Adam(_native.Adam):
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


class AdamW(_native.AdamW):
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


class Adamax(_native.Adamax):
    """``Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *, maximize=False,
    differentiable=False, capturable=False)``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _refuse("Adamax", None, differentiable=(differentiable, False), capturable=(capturable, False))
        super().__init__(params, lr, betas, eps, weight_decay, maximize=maximize)


class NAdam(_native.NAdam):
    """``NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
    decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False, differentiable=False)``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _refuse("NAdam", None, differentiable=(differentiable, False), capturable=(capturable, False))
        super().__init__(params, lr, betas, eps, weight_decay, momentum_decay, decoupled_weight_decay,
                         maximize=maximize)


class RAdam(_native.RAdam):
    """``RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False, *,
    foreach=None, maximize=False, capturable=False, differentiable=False)``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _refuse("RAdam", None, differentiable=(differentiable, False), capturable=(capturable, False))
        super().__init__(params, lr, betas, eps, weight_decay, decoupled_weight_decay, maximize=maximize)


class Adagrad(_native.Adagrad):
    """``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
    foreach=None, *, maximize=False, differentiable=False, fused=None)``."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _refuse("Adagrad", fused, differentiable=(differentiable, False))
        super().__init__(params, lr, lr_decay, weight_decay, initial_accumulator_value, eps, maximize=maximize)


class Adadelta(_native.Adadelta):
    """``Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
    maximize=False, differentiable=False)``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _refuse("Adadelta", None, differentiable=(differentiable, False), capturable=(capturable, False))
        super().__init__(params, lr, rho, eps, weight_decay, maximize=maximize)


class RMSprop(_native.RMSprop):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
    capturable=False, foreach=None, maximize=False, differentiable=False)``."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _refuse("RMSprop", None, differentiable=(differentiable, False), capturable=(capturable, False))
        super().__init__(params, lr, alpha, eps, weight_decay, momentum, centered, maximize=maximize)


class Rprop(_native.Rprop):
    """``Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
    maximize=False, differentiable=False)``."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        _refuse("Rprop", None, differentiable=(differentiable, False), capturable=(capturable, False))
        super().__init__(params, lr, etas, step_sizes, maximize=maximize)


class ASGD(_native.ASGD):
    """``ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, maximize=False,
    differentiable=False, capturable=False)``."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _refuse("ASGD", None, differentiable=(differentiable, False), capturable=(capturable, False))
        super().__init__(params, lr, lambd, alpha, t0, weight_decay, maximize=maximize)


class Adafactor(_native.Adafactor):
    """``Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *, foreach=None,
    maximize=False)``."""

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        super().__init__(params, lr, beta2_decay, eps, d, weight_decay, maximize=maximize)


def __getattr__(name):
    raise missing(__name__, name)
