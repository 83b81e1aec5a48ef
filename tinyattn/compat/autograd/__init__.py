"""``torch.autograd``: gradients as tensors (``grad``, ``backward``), the checks (``gradcheck``,
``gradgradcheck``), anomaly detection, PyTorch-style custom operations (``Function``, with a ``ctx``;
``function.once_differentiable``), the grad modes, the old ``Variable`` wrapper that scripts
written before torch 0.4 still call, forward mode (``forward_ad``) and Jacobians and Hessians
(``functional``).

Each is the native one (``tinyattn.autograd``, ``tinyattn.testing``) with torch's arguments, giving
compat tensors: with ``create_graph=True`` a gradient carries its own graph and can be differentiated
again, to any order, as in torch.

>>> import tinyattn.compat as torch
>>> x = torch.tensor(2.0, requires_grad=True)
>>> (dy,) = torch.autograd.grad(x ** 3, x, create_graph=True)    # 3x²
>>> (d2y,) = torch.autograd.grad(dy, x)                           # 6x
>>> dy.item(), d2y.item(), type(d2y).__name__
(12.0, 12.0, 'Tensor')
"""

from ... import autograd as _native
from ... import backend
from ... import testing as _testing
from ...creation import ones_like
from ...engine import Tensor as _NativeTensor
from ...engine import enable_grad, inference_mode, no_grad, set_grad_enabled
from ..core.tensor import as_compat
from ..refusals import refused
from ..scope import missing
from . import forward_ad, function, functional, grad_mode, variable
from .function import Function, FunctionCtx
from .grad_mode import enforce_grad_layout_policy, set_multithreading_enabled  # noqa: F401
from .variable import Variable  # noqa: F401

detect_anomaly = _native.detect_anomaly
set_detect_anomaly = _native.set_detect_anomaly
is_anomaly_enabled = _native.is_anomaly_enabled

__all__ = ["Function", "FunctionCtx", "Variable", "grad", "backward", "gradcheck", "gradgradcheck", "GradcheckError",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "function", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "forward_ad", "functional", "set_multithreading_enabled",
           "enforce_grad_layout_policy", "NestedIOFunction", "grad_mode", "variable"]


def _sequence(tensors):
    """``tensors`` (one tensor, ``None`` or a sequence) as a tuple."""
    if tensors is None or isinstance(tensors, _NativeTensor):
        return (tensors,)
    return tuple(tensors)


def _ones_where_missing(outputs, grads):
    """``grads`` with each missing gradient of a one-element output made compat ones (as torch's implicit
    gradient), so that what a walk under ``create_graph`` computes from it is compat too; a missing one of
    a larger output stays ``None``, for the native error that says so."""
    if len(grads) == 1 and len(outputs) > 1 and grads[0] is None:
        grads = grads * len(outputs)
    return tuple(as_compat(ones_like(out)) if g is None and isinstance(out, _NativeTensor) and out.numel() == 1 else g
                 for out, g in zip(outputs, grads)) + grads[len(outputs):]


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``torch.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs``, a tuple of compat
    tensors (``None`` for an unused input with ``allow_unused=True``); no ``.grad`` is touched. With
    ``create_graph=True`` they carry their graph and can be differentiated again. ``only_inputs`` is
    accepted and ignored, as in torch. An unused input with ``allow_unused=False`` raises, naming it."""
    outputs = _sequence(outputs)
    grad_outputs = _ones_where_missing(outputs, _sequence(grad_outputs))
    result = _native.grad(outputs, inputs, grad_outputs, retain_graph=retain_graph, create_graph=create_graph,
                          allow_unused=allow_unused, is_grads_batched=is_grads_batched,
                          materialize_grads=materialize_grads)
    return tuple(as_compat(g) for g in result)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """``torch.autograd.backward``: accumulate into the leaves' ``.grad`` the gradients of ``tensors``, each
    weighted by its ``grad_tensors`` entry (``None`` for a one-element tensor: ones), in one walk, so a
    tensor that several of them reach gets the sum (its hooks see the sum too). ``grad_variables`` is
    the old name of ``grad_tensors``."""
    tensors = _sequence(tensors)
    grad_tensors = _ones_where_missing(tensors, _sequence(grad_variables if grad_tensors is None else grad_tensors))
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"backward: got {len(tensors)} tensors and {len(grad_tensors)} gradients")
    if len(tensors) == 1:
        tensors[0].backward(grad_tensors[0], retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)
        return
    with enable_grad():  # one root whose gradient reaches each tensor as its own: d(sum(t * g))/dt = g
        total = sum(_weighted(i, t, g, create_graph) for i, (t, g) in enumerate(zip(tensors, grad_tensors)))
    total.backward(retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


def _weighted(i, tensor, grad, create_graph):
    """``sum(tensor * grad)``, the term of ``tensor`` in ``backward``'s single root."""
    if not isinstance(tensor, _NativeTensor) or not tensor.requires_grad:
        raise RuntimeError(f"backward: tensors[{i}] does not require grad and does not have a grad_fn")
    if grad is None:
        raise RuntimeError(f"backward: tensors[{i}] has shape {tensor.shape}; grad can be implicitly created only "
                           "for scalar outputs: pass its grad_tensors entry")
    grad = grad if isinstance(grad, _NativeTensor) else _NativeTensor(backend.to_device(grad, tensor.device))
    if tuple(grad.shape) != tensor.shape:
        raise RuntimeError(f"backward: grad_tensors[{i}] has shape {tuple(grad.shape)}, expected tensors[{i}]'s "
                           f"shape {tensor.shape}")
    grad = grad if create_graph else grad.detach()  # under create_graph a gradient that requires grad gets one too
    return (tensor * grad.to(tensor.dtype)).sum()


class GradcheckError(_testing.GradcheckError, RuntimeError):
    """A failed ``gradcheck``/``gradgradcheck`` (torch's ``GradcheckError`` is a ``RuntimeError``; the native
    one an ``AssertionError``: this is both)."""


def _checked(check, raise_exception):
    try:
        return check()
    except _testing.GradcheckError as error:
        if raise_exception:
            raise GradcheckError(str(error)) from None
        return False


def _inputs(inputs):
    return (inputs,) if isinstance(inputs, _NativeTensor) else tuple(inputs)


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """``torch.autograd.gradcheck``: ``func``'s gradients at ``inputs`` (float64, a tensor or a tuple) against
    central finite differences (``ta.testing.gradcheck``, whose error names the input, the element and both
    values). ``True``, or a ``GradcheckError`` (``False`` with ``raise_exception=False``). The options for
    torch's other checks (batched, forward mode, fast mode…) are accepted and change nothing."""
    inputs = _inputs(inputs)
    return _checked(lambda: _testing.gradcheck(func, inputs, eps=eps, atol=atol, rtol=rtol), raise_exception)


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0, check_undefined_grad=True,
                  check_grad_dtypes=False, check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True,
                  fast_mode=False, masked=False):
    """``torch.autograd.gradgradcheck``: ``func``'s second derivatives at ``inputs`` (the gradients of
    ``autograd.grad(func(*inputs), inputs, grad_outputs, create_graph=True)``, random ``grad_outputs``
    when not given) against finite differences of the first (``ta.testing.gradgradcheck``). ``True``, or a
    ``GradcheckError`` (``False`` with ``raise_exception=False``); torch's other options change nothing."""
    inputs = _inputs(inputs)
    grad_outputs = None if grad_outputs is None else _inputs(grad_outputs)
    return _checked(lambda: _testing.gradgradcheck(func, inputs, grad_outputs, eps=eps, atol=atol, rtol=rtol),
                    raise_exception)


NestedIOFunction = refused("torch.autograd.NestedIOFunction",
                           "the legacy nested-input Function is not kept; write a torch.autograd.Function")


def __getattr__(name):
    raise missing(__name__, name)
