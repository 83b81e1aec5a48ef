"""``torch.func``: ``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap`` and
``functional_call``, composable to any depth, with torch's arguments.

Each is the native transform (``tinyattn.func``), its results compat tensors (trees of them keep their
shape: tuples, lists, dicts). ``functional_call`` takes a compat module's parameters by torch's names, the
names of its ``state_dict``: a Transformer layer's ``self_attn.in_proj_weight`` (which the native layer
keeps as three projections) is cut into its thirds for the call, differentiably, so that a gradient with
respect to it is a gradient with respect to the packed tensor, as in torch.

Inside ``vmap`` the function sees one example (a batched tensor, with the native tensor's methods).

>>> import tinyattn.compat as torch
>>> from tinyattn.compat.func import functional_call, grad, vmap
>>> model = torch.nn.Linear(3, 1).double()
>>> params = {k: v.detach() for k, v in model.named_parameters()}
>>> def loss(params, x, y):
...     return ((functional_call(model, params, (x,)) - y) ** 2).sum()
>>> x, y = torch.randn(5, 3).double(), torch.randn(5, 1).double()
>>> per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)    # one gradient per example
>>> per_sample["weight"].shape, type(per_sample["weight"]).__name__
((5, 1, 3), 'Tensor')
"""

import functools

from .. import func as _native
from ..engine import Tensor as _NativeTensor
from ..ops import stack
from .core.tensor import as_compat_tree
from .refusals import refused
from .scope import missing

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "functional_call",
           "linearize", "stack_module_state", "functionalize", "debug_unwrap", "rearrange",
           "replace_all_batch_norm_modules_"]


def _returning_compat(transform):
    """``transform`` (a native function transform) whose transformed functions give compat tensors."""
    @functools.wraps(transform)
    def compat_transform(func, *args, **kwargs):
        transformed = transform(func, *args, **kwargs)

        @functools.wraps(func)
        def run(*inputs, **options):
            return as_compat_tree(transformed(*inputs, **options))
        return run
    return compat_transform


grad = _returning_compat(_native.grad)
grad_and_value = _returning_compat(_native.grad_and_value)
jacrev = _returning_compat(_native.jacrev)
jacfwd = _returning_compat(_native.jacfwd)
hessian = _returning_compat(_native.hessian)
vmap = _returning_compat(_native.vmap)


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)`` (``(…, aux)`` with ``has_aux``), ``vjp_fn(cotangents)`` giving one gradient per
    primal: ``tinyattn.func.vjp`` with compat tensors."""
    result = _native.vjp(func, *primals, has_aux=has_aux)
    pullback = result[1]

    @functools.wraps(pullback)
    def vjp_fn(cotangents):
        return as_compat_tree(pullback(cotangents))
    return (as_compat_tree(result[0]), vjp_fn) + tuple(as_compat_tree(r) for r in result[2:])


@functools.wraps(_native.jvp)
def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    return as_compat_tree(_native.jvp(func, primals, tangents, strict=strict, has_aux=has_aux))


_PACKED = ("in_proj_weight", "in_proj_bias")
_SEPARATE = ("q_proj_weight", "k_proj_weight", "v_proj_weight")


def _own_names(module):
    """The dotted names of ``module``'s parameters and buffers, as its tables hold them."""
    return {f"{prefix}.{key}" if prefix else key
            for prefix, sub in module.named_modules() for table in (sub._parameters, sub._buffers) for key in table}


def _in_native_names(module, values):
    """``values`` (torch's names → tensors) by the names ``module`` holds: a name it has stays; a packed
    projection of the native attention (``in_proj_weight``, ``in_proj_bias``: q, k, v stacked; or
    ``q_proj_weight``…) goes to its ``q_proj``/``k_proj``/``v_proj``, and a decoder's ``multihead_attn``
    to its ``cross_attn`` (``interop`` maps checkpoints the same way). A name that fits nothing stays,
    for the native error that names it."""
    own, result = _own_names(module), {}
    for name, value in values.items():
        if name in own:
            result[name] = value
            continue
        head, _, last = name.rpartition(".")
        head = ".".join("cross_attn" if part == "multihead_attn" else part for part in head.split(".")) if head else ""
        prefix = head + "." if head else ""
        if last in _PACKED and isinstance(value, _NativeTensor) and prefix + "q_proj.weight" in own:
            size = value.shape[0] // 3  # (3E, E) or (3E,): q, k, v one above the other
            kind = "weight" if last == "in_proj_weight" else "bias"
            for i, projection in enumerate(("q_proj", "k_proj", "v_proj")):
                result[f"{prefix}{projection}.{kind}"] = value[i * size:(i + 1) * size]
        elif last in _SEPARATE and prefix + last[:6] + ".weight" in own:
            result[prefix + last[:6] + ".weight"] = value
        elif prefix + last in own:
            result[prefix + last] = value
        else:
            result[name] = value
    return result


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with its parameters and buffers replaced, for the call, by those of
    ``parameter_and_buffer_dicts`` (a dict or a sequence of dicts; torch's ``state_dict`` names, or the
    module's own ``named_parameters()`` names): ``tinyattn.func.functional_call``, the result compat."""
    dicts = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, (list, tuple)) else \
        [parameter_and_buffer_dicts]
    dicts = [_in_native_names(module, d) for d in dicts]
    return as_compat_tree(_native.functional_call(module, dicts, args, kwargs, tie_weights=tie_weights, strict=strict))


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``, ``jvp_fn(*tangents)`` giving the Jacobian-vector product at ``primals``
    (torch's ``linearize``; each call of ``jvp_fn`` runs forward mode again, where torch replays a traced graph)."""
    output = as_compat_tree(func(*primals))

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn


def _stacked_leaf(tensors, name):
    requires = [t.requires_grad for t in tensors]
    if any(requires) and not all(requires):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = as_compat_tree(stack([t.detach() for t in tensors]))
    if all(requires):
        result.requires_grad_(True)
    return result


def stack_module_state(models):
    """``(params, buffers)``: each parameter and buffer of ``models`` (modules of one class, in one mode) stacked
    along a new first dimension, by name; stacked parameters are new leaves requiring grad (for
    ``vmap(functional_call)`` over an ensemble), as torch's."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    tables = [dict(m.named_parameters()) for m in models]
    params = {name: _stacked_leaf([table[name] for table in tables], name) for name in tables[0]}
    tables = [dict(m.named_buffers()) for m in models]
    buffers = {name: _stacked_leaf([table[name] for table in tables], name) for name in tables[0]}
    return params, buffers


def functionalize(func, *, remove="mutations"):
    """``func`` itself: torch's ``functionalize`` rewrites the in-place operations of a traced program into
    out-of-place ones with the same results and the same writes to the inputs; compat traces no program, and
    running ``func`` as it is gives exactly those results."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")
    return func


debug_unwrap = refused("torch.func.debug_unwrap", "compat's transforms hand the function no wrapped tensor to "
                                                  "unwrap; print the tensor inside the transform instead")
rearrange = refused("torch.func.rearrange", "einops-style patterns are not parsed here; write the reshape and "
                                            "permute (or install einops)")
replace_all_batch_norm_modules_ = refused(
    "torch.func.replace_all_batch_norm_modules_",
    "compat does not patch batch-norm modules in place; build them with track_running_stats=False")


def __getattr__(name):
    raise missing(__name__, name)
