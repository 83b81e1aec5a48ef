"""The registry: every operation the tests check, once, with the tables it feeds and the nodes it records.

A row (``Spec``) is a case strategy (``cases``), our call and PyTorch's, the Function classes it records
(``nodes``, by name: forward and backward-under-``create_graph`` nodes alike) and the tables that run it:

    torch       values and gradients against PyTorch, float64 and float32, every device; gradcheck
                (tests/engine/test_ops.py)
    api         the everyday tensor API: values and gradients against PyTorch in float64; gradcheck
                (tests/engine/test_tensor_api.py)
    order3      second and third derivatives against PyTorch's (tests/engine/test_higher_order.py)
    order2      second derivatives against PyTorch's (test_higher_order.py)
    gradgrad    second derivatives against finite differences of the first (test_higher_order.py)
    functional  second derivatives against PyTorch's, as written and compiled (test_higher_order_layers.py),
                and tangents against PyTorch's forward AD (tests/engine/test_forward_ad.py)
    jvp         forward-mode tangents against finite differences and the transpose of the VJP (test_forward_ad.py)
    vmap        ``vmap`` against a loop and torch.func, and every ``ta.func`` transform against torch.func's
                (tests/func/test_func_vmap.py, test_func_transforms.py)

``tests/engine/test_registry.py`` fails for a ``Function`` subclass of the library that no row names, that
has no JVP rule or no batching rule (unless excluded there, with a reason), and for a row whose nodes its graph
does not record.
"""

from typing import NamedTuple

import numpy as np
import torch
import torch.utils.checkpoint
from cases import (
    along_a_dim,
    apart,
    array_index_case,
    attention_case,
    basic_index_case,
    cat_case,
    chunk_case,
    clamp_case,
    cross_entropy_case,
    dim_case,
    einsum_case,
    embedding_case,
    expand_case,
    flatten_case,
    gather_case,
    gelu_case,
    inplace_case,
    joining_case,
    layer_norm_case,
    mask_index_case,
    masked_fill_case,
    matmul_case,
    one,
    permute_case,
    permute_transpose_case,
    reduction,
    repeat_case,
    repeat_interleave_case,
    reshape_case,
    same_shape,
    setitem_case,
    split_case,
    squeeze_case,
    stack_case,
    ties,
    topk_case,
    transpose_case,
    triangle_case,
    two,
    unsqueeze_case,
    unsqueeze_expand_squeeze_case,
    view_write_case,
    where_case,
    where_masked_fill_case,
    with_scalar,
)
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.compat as compat
import tinyattn.nn.functional as F
from tinyattn import testing as tt
from tinyattn.distributions.distribution import digamma, lgamma
from tinyattn.ops_extra import cumsum  # not in the native namespace yet (compat has it)

TF = torch.nn.functional


class Spec(NamedTuple):
    name: str
    case: object  # strategy of (list of float64 arrays, dict of options)
    ours: object  # (*tensors, **options) -> tensor or tuple of tensors
    theirs: object  # the same in PyTorch
    tables: str = ""  # the tables that run it, separated by spaces
    nodes: tuple = ()  # the names of the Function classes it records
    gradcheck: bool = True  # False where the operation has kinks the case does not avoid


def convert(value, make):
    """Arrays inside ``value`` (a tree of tuples, lists and dicts) made tensors by ``make``."""
    if isinstance(value, np.ndarray):
        return make(value)
    if isinstance(value, (tuple, list)):
        return type(value)(convert(v, make) for v in value)
    if isinstance(value, dict):
        return {k: convert(v, make) for k, v in value.items()}
    return value


# ----------------------------------------------------------------------------- the functions of composite rows


def written_in_place(a, b):
    x = a * 1
    x[1:] = b * 2
    return x * x * a + x.tanh()


def written_through_a_view(a, b, row):
    x = a * 1
    view = x.T
    view[row] = b * 2
    return x * a


def accumulated(a, b, dim):
    x = ta.cat([a, b], dim) * 1
    x += x.tanh()
    return x


def set_masked(x, value=None, mask=None, **options):
    y = x * 1
    y[mask] = options.get("value") if value is None else value
    return y


def inplace_chain(x, y):
    """``+=``, ``mul_``, ``masked_fill_`` and an assignment through a view, in one graph."""
    h = x * 1
    h += y
    h.mul_(y)
    h.masked_fill_(h > 1.0, -1.0)
    v = h.view(-1)
    v[0] = 3.0
    return h * y


def spread(case):
    """Away from std's kink at zero spread."""
    (x,), options = case
    return bool(torch.from_numpy(x).var(**options).min() > 1e-3) if x.size else False


def custom_function(lib):
    """``(sin x, cos x)`` and ``x³`` through ``lib.autograd.Function`` (ours or PyTorch's), with JVP rules."""
    class SinCos(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x.sin(), x.cos()

        @staticmethod
        def backward(ctx, grad_sin, grad_cos):
            (x,) = ctx.saved_tensors
            return grad_sin * x.cos() - grad_cos * x.sin()

        @staticmethod
        def jvp(ctx, dx):
            (x,) = ctx.saved_tensors
            return x.cos() * dx, -x.sin() * dx

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x * x * grad

        @staticmethod
        def jvp(ctx, dx):
            (x,) = ctx.saved_tensors
            return 3 * x * x * dx

    return lambda x: (*SinCos.apply(x), Cube.apply(x))


def unsqueeze_expand_squeeze(x, dim, size, squeeze):
    y = x.unsqueeze(dim)
    sizes = list(y.shape)
    sizes[dim] = size
    expanded = y.expand(*sizes)
    squeezed = x.squeeze() if squeeze is None else x.squeeze(squeeze)
    return expanded * 2.0, squeezed.tanh()


def joined(cat, stack):
    def function(a, b, dim, sections, stack_dim):
        whole = cat([a, b.tanh()], dim)
        return (stack([a, a * a], stack_dim),) + tuple(whole.split(sections, dim))
    return function


def reductions(x, dim, keepdim, module):
    every = tuple(range(x.ndim)) if dim is None else dim
    if module is ta:
        return x.sum(dim, keepdim), x.mean(dim=dim, keepdim=keepdim), x.amax(dim, keepdim), \
            x.var(dim, keepdim=keepdim, correction=0)
    return x.sum(every, keepdim), x.mean(dim=every, keepdim=keepdim), x.amax(every, keepdim), \
        x.var(every, keepdim=keepdim, correction=0)


def composite_layer_norm(x, w, b, normalized_shape, eps):
    """torch's layer_norm written out: torch 2.13's fused layer_norm has wrong second derivatives (the mixed
    weight-input block lacks its centring term: its rows do not sum to 0, as shift invariance demands)."""
    dims = tuple(range(-len(normalized_shape), 0))
    centred = x - x.mean(dims, keepdim=True)
    return centred / torch.sqrt(x.var(dims, keepdim=True, correction=0) + eps) * w + b


def ours_attention(q, k, v, attn_mask, is_causal, need_weights, sdpa=F.scaled_dot_product_attention):
    out, weights = sdpa(q, k, v, attn_mask=attn_mask, is_causal=is_causal, need_weights=need_weights)
    return (out, weights) if need_weights else out


def torch_attention(q, k, v, attn_mask, is_causal, need_weights):
    """torch's, the causal mask folded into ``attn_mask`` (torch refuses both at once), and the weights by hand."""
    lq, lk = q.shape[-2], k.shape[-2]
    allowed = torch.ones(lq, lk, dtype=torch.bool).tril()
    if is_causal and attn_mask is None:
        attn_mask = allowed
    elif is_causal and attn_mask.dtype == torch.bool:
        attn_mask = attn_mask & allowed
    elif is_causal:
        attn_mask = attn_mask.masked_fill(~allowed, -float("inf"))
    out = TF.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    if not need_weights:
        return out
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, -float("inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    empty = (scores == -float("inf")).all(-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(empty, 0.0), -1).masked_fill(empty, 0.0)
    return out, weights


def as_written(fn):
    return fn


def functionals(route=as_written):
    """The functionals' rows, ``F.layer_norm`` and ``F.cross_entropy`` passed through ``route`` (``ta.compile``:
    their fused forms; the other functions have none)."""
    layer_norm, cross_entropy = route(F.layer_norm), route(F.cross_entropy)
    wide = one(elements=lambda s: tt.arrays(s, high=3.0))
    return [Spec(*row, tables="functional jvp", nodes=nodes) for *row, nodes in [
        ("softmax", along_a_dim(), lambda x, dim: F.softmax(x, dim) * x, lambda x, dim: TF.softmax(x, dim) * x,
         ("Softmax",)),
        ("log_softmax", along_a_dim(), lambda x, dim: F.log_softmax(x, dim).exp() * F.log_softmax(x, dim),
         lambda x, dim: TF.log_softmax(x, dim).exp() * TF.log_softmax(x, dim), ("LogSoftmax",)),
        ("layer_norm", layer_norm_case(), lambda x, w, b, **o: layer_norm(x, weight=w, bias=b, **o),
         lambda x, w, b, **o: TF.layer_norm(x, weight=w, bias=b, **o), ("LayerNorm",)),
        ("layer_norm_plain", layer_norm_case(), lambda x, w, b, **o: layer_norm(x, **o) * w,
         lambda x, w, b, **o: TF.layer_norm(x, **o) * w, ()),
        ("cross_entropy", cross_entropy_case(), lambda x, **o: cross_entropy(x, **o),
         lambda x, **o: TF.cross_entropy(x, **o), ("LogSoftmax",)),
        ("gelu", wide, lambda x: F.gelu(x), lambda x: TF.gelu(x), ("Erf",)),
        ("gelu_tanh", wide, lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"), ()),
        ("relu", wide, lambda x: F.relu(x) * x, lambda x: TF.relu(x) * x, ()),
        ("dropout_eval", wide, lambda x: F.dropout(x.tanh(), 0.5, training=False) * x,
         lambda x: TF.dropout(x.tanh(), 0.5, training=False) * x, ()),
        ("dropout_p0", wide, lambda x: F.dropout(x.tanh(), 0.0) * x, lambda x: TF.dropout(x.tanh(), 0.0) * x, ()),
        ("embedding", embedding_case(), lambda w, indices: F.embedding(indices, w).tanh() * F.embedding(indices, w),
         lambda w, indices: TF.embedding(indices, w).tanh() * TF.embedding(indices, w), ()),
    ]]


# ----------------------------------------------------------------------------- the rows

_sigmoid = one(elements=lambda s: tt.arrays(s, high=6.0))


def _inside_one(shape):
    """Arrays with elements in ``(-1, 1)``, away from the ends (the domain of asin, acos, erfinv)."""
    return tt.arrays(shape, low=0.1, high=0.9)


def _amax_theirs(x, dim, keepdim):
    return x.amax(() if dim is None else dim, keepdim)


ROWS = [
    # the primitives, first order (and the elementwise ones to third order, and in forward mode)
    Spec("add", two(), lambda a, b: a + b, lambda a, b: a + b, "torch jvp", ("Add",)),
    Spec("sub", two(), lambda a, b: a - b, lambda a, b: a - b, "torch jvp", ("Sub",)),
    Spec("mul", two(), lambda a, b: a * b, lambda a, b: a * b, "torch order2 jvp", ("Mul",)),
    Spec("div", two(), lambda a, b: a / b, lambda a, b: a / b, "torch order2 gradgrad jvp", ("Div",)),
    Spec("pow", two(tt.positive_arrays, tt.arrays), lambda a, b: a**b, lambda a, b: a**b,
         "torch order2 gradgrad jvp", ("Pow",)),
    Spec("radd", with_scalar(), lambda x, c: c + x, lambda x, c: c + x, "torch jvp"),
    Spec("rsub", with_scalar(), lambda x, c: c - x, lambda x, c: c - x, "torch jvp"),
    Spec("rmul", with_scalar(), lambda x, c: c * x, lambda x, c: c * x, "torch jvp"),
    Spec("rdiv", with_scalar(), lambda x, c: c / x, lambda x, c: c / x, "torch jvp"),
    Spec("div_scalar", with_scalar(), lambda x, c: x / c, lambda x, c: x / c, "torch jvp"),
    Spec("pow_scalar", with_scalar(tt.positive_arrays), lambda x, c: x**c, lambda x, c: x**c, "torch jvp"),
    Spec("square", one(), lambda x: x**2, lambda x: x**2, "torch jvp"),
    Spec("rpow", with_scalar(numbers=st.sampled_from([0.5, 2.0, 3])), lambda x, c: c**x, lambda x, c: c**x,
         "torch jvp"),
    Spec("matmul", matmul_case(), lambda a, b: a @ b, lambda a, b: a @ b, "torch jvp", ("MatMul",)),
    Spec("neg", one(), lambda x: -x, lambda x: -x, "torch order3 jvp", ("Neg",)),
    Spec("exp", one(), ta.exp, torch.exp, "torch order3 gradgrad jvp", ("Exp",)),
    Spec("log", one(elements=tt.positive_arrays), ta.log, torch.log, "torch order3 jvp", ("Log",)),
    Spec("sqrt", one(elements=tt.positive_arrays), ta.sqrt, torch.sqrt, "torch order3 jvp", ("Sqrt",)),
    Spec("tanh", one(), lambda x: x.tanh(), torch.tanh, "torch order3 jvp", ("Tanh",)),
    Spec("sigmoid", _sigmoid, lambda x: x.sigmoid(), torch.sigmoid, "torch order3 gradgrad jvp", ("Sigmoid",)),
    Spec("relu", one(), lambda x: x.relu(), torch.relu, "torch order3 jvp", ("ReLU",)),
    Spec("abs", one(), lambda x: x.abs(), torch.abs, "torch order3 jvp", ("Abs",)),
    Spec("sin", one(), ta.sin, torch.sin, "order3 gradgrad api jvp", ("Sin",)),
    Spec("cos", one(), ta.cos, torch.cos, "order3 jvp", ("Cos",)),
    Spec("clamp", clamp_case(), lambda x, **o: ta.clamp(x, **o), lambda x, **o: torch.clamp(x, **o),
         "order3 jvp", ("Clamp",)),
    Spec("square_then_tanh", one(), lambda x: (x * x).tanh() * x, lambda x: (x * x).tanh() * x, "order3"),
    Spec("sum", reduction(), lambda x, dim, keepdim: x.sum(dim, keepdim), lambda x, dim, keepdim: x.sum(dim, keepdim),
         "torch jvp", ("Sum",)),
    Spec("mean", reduction(), lambda x, dim, keepdim: x.mean(dim=dim, keepdim=keepdim),
         lambda x, dim, keepdim: x.mean(dim=dim, keepdim=keepdim), "torch jvp"),
    Spec("amax", reduction(tt.distinct_arrays), lambda x, dim, keepdim: x.amax(dim, keepdim), _amax_theirs,
         "torch jvp", ("Amax",)),
    Spec("amax_ties", reduction(ties), lambda x, dim, keepdim: x.amax(dim, keepdim), _amax_theirs, "torch",
         ("Amax",), gradcheck=False),
    Spec("var", reduction(corrections=True), lambda x, **o: x.var(**o), lambda x, **o: x.var(**o),
         "torch order2 gradgrad jvp"),
    Spec("reshape", reshape_case(), lambda x, shape: x.reshape(shape), lambda x, shape: x.reshape(shape),
         "torch jvp", ("Reshape",)),
    Spec("view", reshape_case(), lambda x, shape: x.view(*shape), lambda x, shape: x.view(shape), "torch jvp",
         ("Reshape",)),
    Spec("transpose", transpose_case(), lambda x, **o: x.transpose(**o), lambda x, **o: x.transpose(**o),
         "torch jvp", ("Permute",)),
    Spec("T", one(tt.shapes(min_dims=2, max_dims=2)), lambda x: x.T, lambda x: x.T, "torch jvp", ("Permute",)),
    Spec("permute", permute_case(), lambda x, dims: x.permute(*dims), lambda x, dims: x.permute(dims), "torch jvp",
         ("Permute",)),
    Spec("unsqueeze", unsqueeze_case(), lambda x, dim: x.unsqueeze(dim), lambda x, dim: x.unsqueeze(dim),
         "torch jvp", ("Reshape",)),
    Spec("squeeze", squeeze_case(), lambda x, dim: x.squeeze(dim),
         lambda x, dim: x.squeeze() if dim is None else x.squeeze(dim), "torch jvp", ("Reshape",)),
    Spec("expand", expand_case(), lambda x, size: x.expand(*size), lambda x, size: x.expand(size), "torch jvp",
         ("Expand",)),
    Spec("flatten", flatten_case(), lambda x, **o: x.flatten(**o), lambda x, **o: x.flatten(**o), "torch jvp",
         ("Reshape",)),
    Spec("getitem_basic", basic_index_case(), lambda x, index: x[index], lambda x, index: x[index], "torch jvp",
         ("GetItem", "Scatter")),
    Spec("getitem_array", array_index_case(), lambda x, index: x[index], lambda x, index: x[index], "torch jvp",
         ("GetItem", "Scatter")),
    Spec("getitem_mask", mask_index_case(), lambda x, index: x[index], lambda x, index: x[index], "torch jvp",
         ("GetItem", "Scatter")),
    Spec("masked_fill", masked_fill_case(), lambda x, mask, value: x.masked_fill(mask, value),
         lambda x, mask, value: x.masked_fill(mask, value), "torch jvp", ("Where",)),
    Spec("where", where_case(), lambda a, b, condition: ta.where(condition, a, b),
         lambda a, b, condition: torch.where(condition, a, b), "torch jvp", ("Where",)),
    Spec("where_scalar", where_case(with_number=True),
         lambda a, condition, c: (ta.where(condition, a, c), ta.where(condition, c, a)),
         lambda a, condition, c: (torch.where(condition, a, c), torch.where(condition, c, a)), "torch jvp",
         ("Where",)),
    Spec("cat", cat_case(), lambda *xs, dim: ta.cat(xs, dim), lambda *xs, dim: torch.cat(xs, dim), "torch jvp",
         ("Concatenate",)),
    Spec("stack", stack_case(), lambda *xs, dim: ta.stack(xs, dim), lambda *xs, dim: torch.stack(xs, dim),
         "torch jvp", ("Stack",)),
    Spec("split", split_case(), lambda x, sections, dim: x.split(sections, dim),
         lambda x, sections, dim: x.split(sections, dim), "torch jvp", ("GetItem",)),
    Spec("chunk", chunk_case(), lambda x, **o: x.chunk(**o), lambda x, **o: x.chunk(**o), "torch jvp",
         ("GetItem",)),
    Spec("to_float64", one(), lambda x: x.to(ta.float64) * x.double(), lambda x: x.to(torch.float64) * x.double(),
         "torch jvp", ("To",)),

    # the primitives, second order: composed with a nonlinearity where their own second derivative is zero
    Spec("add", two(), lambda a, b: (a + b) * a, lambda a, b: (a + b) * a, "order2", ("Add",)),
    Spec("sub", two(), lambda a, b: (a - b) * b, lambda a, b: (a - b) * b, "order2", ("Sub",)),
    Spec("pow_scalar", one(elements=tt.positive_arrays), lambda x: x**2.5 + x**3, lambda x: x**2.5 + x**3,
         "order2"),
    Spec("sum", reduction(), lambda x, dim, keepdim: (x * x).sum(dim, keepdim),
         lambda x, dim, keepdim: (x * x).sum(dim, keepdim), "order2", ("Sum",)),
    Spec("mean", reduction(), lambda x, dim, keepdim: x.exp().mean(dim=dim, keepdim=keepdim),
         lambda x, dim, keepdim: x.exp().mean(dim=dim, keepdim=keepdim), "order2"),
    Spec("amax", reduction(tt.distinct_arrays), lambda x, dim, keepdim: x.amax(dim, keepdim) ** 2 * x.sum(),
         lambda x, dim, keepdim: _amax_theirs(x, dim, keepdim) ** 2 * x.sum(), "order2 gradgrad", ("Amax",)),
    Spec("cumsum", along_a_dim(), lambda x, dim: cumsum(x * x, dim), lambda x, dim: torch.cumsum(x * x, dim),
         "order2 jvp", ("Cumsum",)),
    Spec("reshape", reshape_case(), lambda x, shape: (x * x).reshape(shape) * 3,
         lambda x, shape: (x * x).reshape(shape) * 3, "order2", ("Reshape",)),
    Spec("transpose", transpose_case(), lambda x, **o: (x * x).transpose(**o).tanh(),
         lambda x, **o: (x * x).transpose(**o).tanh(), "order2", ("Permute",)),
    Spec("permute", permute_case(), lambda x, dims: x.permute(*dims).exp(), lambda x, dims: x.permute(dims).exp(),
         "order2", ("Permute",)),
    Spec("expand", expand_case(), lambda x, size: x.expand(*size).sin(), lambda x, size: x.expand(size).sin(),
         "order2", ("Expand",)),
    Spec("unsqueeze", unsqueeze_case(), lambda x, dim: x.unsqueeze(dim).tanh(),
         lambda x, dim: x.unsqueeze(dim).tanh(), "order2", ("Reshape",)),
    Spec("squeeze", squeeze_case(), lambda x, dim: x.squeeze(dim).exp(),
         lambda x, dim: (x.squeeze() if dim is None else x.squeeze(dim)).exp(), "order2", ("Reshape",)),
    Spec("flatten", flatten_case(), lambda x, **o: x.flatten(**o).tanh(), lambda x, **o: x.flatten(**o).tanh(),
         "order2", ("Reshape",)),
    Spec("getitem_basic", basic_index_case(), lambda x, index: x.tanh()[index] * x[index],
         lambda x, index: x.tanh()[index] * x[index], "order2", ("GetItem", "Scatter")),
    Spec("getitem_array", array_index_case(), lambda x, index: x[index].sin() * x[index],
         lambda x, index: x[index].sin() * x[index], "order2 gradgrad", ("GetItem", "Scatter")),
    Spec("cat", cat_case(), lambda *xs, dim: ta.cat([x * x for x in xs], dim).tanh(),
         lambda *xs, dim: torch.cat([x * x for x in xs], dim).tanh(), "order2"),
    Spec("stack", stack_case(), lambda *xs, dim: ta.stack(xs, dim).exp(),
         lambda *xs, dim: torch.stack(xs, dim).exp(), "order2", ("Stack",)),
    Spec("split", split_case(), lambda x, sections, dim: tuple(p.tanh() for p in (x * x).split(sections, dim)),
         lambda x, sections, dim: tuple(p.tanh() for p in (x * x).split(sections, dim)), "order2", ("GetItem",)),
    Spec("chunk", chunk_case(), lambda x, **o: tuple(p.exp() for p in x.chunk(**o)),
         lambda x, **o: tuple(p.exp() for p in x.chunk(**o)), "order2", ("GetItem",)),
    Spec("where", where_case(), lambda a, b, condition: ta.where(condition, a * b, b.exp()),
         lambda a, b, condition: torch.where(condition, a * b, b.exp()), "order2 gradgrad", ("Where",)),
    Spec("masked_fill", masked_fill_case(), lambda x, mask, value: (x * x).masked_fill(mask, value).tanh(),
         lambda x, mask, value: (x * x).masked_fill(mask, value).tanh(), "order2", ("Where",)),
    Spec("matmul", matmul_case(), lambda a, b: (a @ b).tanh(), lambda a, b: (a @ b).tanh(), "order2 gradgrad",
         ("MatMul",)),
    Spec("matmul_squared", matmul_case(), lambda a, b: (a @ b) * (a @ b), lambda a, b: (a @ b) * (a @ b),
         "order2", ("MatMul",)),
    Spec("inplace_nonleaf", inplace_case(), written_in_place, written_in_place, "order2 gradgrad jvp",
         ("SetItem",)),

    # the everyday tensor API
    Spec("cos", one(), lambda x: x.cos(), torch.cos, "api", ("Cos",)),
    Spec("clamp", clamp_case(), lambda x, **o: x.clamp(**o), lambda x, **o: x.clamp(**o), "api", ("Clamp",)),
    Spec("clone", one(), lambda x: x.clone() * x.contiguous(), lambda x: x.clone() * x.contiguous(), "api",
         ("Clone",)),
    Spec("std", reduction(tt.distinct_arrays, corrections=True).filter(spread), lambda x, **o: x.std(**o),
         lambda x, **o: x.std(**o), "api"),
    Spec("var_unbiased", reduction(), lambda x, dim, keepdim: x.var(dim, False, keepdim),
         lambda x, dim, keepdim: x.var(dim, unbiased=False, keepdim=keepdim), "api"),
    Spec("norm", dim_case(tt.positive_arrays), lambda x, **o: x.norm(**o), lambda x, **o: x.norm(**o), "api"),
    Spec("max_dim", dim_case(), lambda x, **o: x.max(**o).values, lambda x, **o: x.max(**o).values, "api"),
    Spec("min_dim", dim_case(), lambda x, **o: ta.min(x, **o)[0], lambda x, **o: torch.min(x, **o)[0], "api"),
    Spec("max_all", one(elements=tt.distinct_arrays), lambda x: x.max(), lambda x: x.max(), "api"),
    Spec("maximum", apart(), lambda a, b: ta.max(a, b), lambda a, b: torch.max(a, b), "api"),
    Spec("topk", topk_case(), lambda x, **o: x.topk(**o).values, lambda x, **o: x.topk(**o).values, "api"),
    Spec("gather", gather_case(), lambda x, dim, index: x.gather(dim, index),
         lambda x, dim, index: x.gather(dim, index), "api"),
    Spec("softmax", dim_case(tt.arrays, keepdim=False), lambda x, dim: x.softmax(dim),
         lambda x, dim: x.softmax(dim), "api", ("Softmax",)),
    Spec("repeat", repeat_case(), lambda x, sizes: x.repeat(*sizes), lambda x, sizes: x.repeat(*sizes), "api"),
    Spec("repeat_interleave", repeat_interleave_case(), lambda x, **o: x.repeat_interleave(**o),
         lambda x, **o: x.repeat_interleave(**o), "api"),
    Spec("tril", triangle_case(), lambda x, diagonal: ta.tril(x, diagonal),
         lambda x, diagonal: torch.tril(x, diagonal), "api"),
    Spec("triu", triangle_case(), lambda x, diagonal: x.triu(diagonal), lambda x, diagonal: x.triu(diagonal), "api"),
    Spec("mT", one(tt.shapes(min_dims=2, max_dims=3, max_side=3)), lambda x: x.mT, lambda x: x.mT, "api"),
    Spec("setitem_mask", setitem_case(), set_masked, set_masked, "api", ("SetItem",)),
    Spec("inplace_chain", same_shape(), inplace_chain, inplace_chain, "api", ("SetItem", "CopySlices")),
    Spec("sign", one(), lambda x: compat.sign(x) * x.exp(), lambda x: torch.sign(x) * x.exp(), "api jvp",
         ("Where",)),
    Spec("checkpoint", one(), lambda x: ta.utils.checkpoint(lambda y: y.tanh() * y, x),
         lambda x: torch.utils.checkpoint.checkpoint(lambda y: y.tanh() * y, x, use_reentrant=False), "api",
         ("Checkpoint",)),
    Spec("custom_function", one(), custom_function(ta), custom_function(torch), "api jvp",
         ("_Node", "_Outputs", "Pick")),

    # the functionals, second order (and forward mode)
    *functionals(),

    # forward mode: what else carries a tangent
    Spec("clone", two(), lambda a, b: (a * b).clone() * a, None, "jvp", ("Clone",)),
    Spec("einsum", einsum_case(), lambda q, k, w: compat.einsum("bqd,bkd,k->bq", q, k, w), None, "jvp",
         ("MatMul",)),
    Spec("view_write", view_write_case(), written_through_a_view, None, "jvp", ("CopySlices",)),
    Spec("in_place_add", cat_case().filter(lambda c: len(c[0]) == 2), accumulated, None, "jvp"),
    Spec("attention", attention_case(), ours_attention, torch_attention, "jvp", ("Softmax",)),

    # the transforms' cases: vmap and every ta.func transform, against torch.func
    Spec("elementwise", one(),
         lambda x: x.exp() * x.tanh() + x.sigmoid() * x.abs() + x.abs().sqrt() - x.abs().log() + x.relu() ** 2 - x,
         lambda x: x.exp() * x.tanh() + x.sigmoid() * x.abs() + x.abs().sqrt() - x.abs().log() + x.relu() ** 2 - x,
         "vmap", ("Exp", "Tanh", "Sigmoid", "Abs", "Sqrt", "Log", "ReLU", "Pow", "Sub", "Add", "Mul")),
    Spec("binary_broadcast", two(),
         lambda a, b: a * b - a / b + (a + b) ** 2 + a.abs() ** b - 2.0 / a,
         lambda a, b: a * b - a / b + (a + b) ** 2 + a.abs() ** b - 2.0 / a, "vmap", ("Mul", "Div", "Pow")),
    Spec("reductions", reduction(tt.distinct_arrays, min_dims=1), lambda x, **o: reductions(x, **o, module=ta),
         lambda x, **o: reductions(x, **o, module=torch), "vmap", ("Sum", "Amax")),
    Spec("reshape", reshape_case(), lambda x, shape: x.reshape(shape) * x.sum(),
         lambda x, shape: x.reshape(shape) * x.sum(), "vmap", ("Reshape",)),
    Spec("permute_transpose", permute_transpose_case(),
         lambda x, dims, dim0, dim1: (x.permute(*dims), x.transpose(dim0, dim1) ** 2),
         lambda x, dims, dim0, dim1: (x.permute(dims), x.transpose(dim0, dim1) ** 2), "vmap", ("Permute",)),
    Spec("unsqueeze_expand_squeeze", unsqueeze_expand_squeeze_case(), unsqueeze_expand_squeeze,
         unsqueeze_expand_squeeze, "vmap", ("Reshape", "Expand")),
    Spec("flatten", flatten_case(), lambda x, **o: x.flatten(**o) * x.flatten(**o),
         lambda x, **o: x.flatten(**o) * x.flatten(**o), "vmap", ("Reshape",)),
    Spec("index_basic", basic_index_case(), lambda x, index: x[index] * x[index],
         lambda x, index: x[index] * x[index], "vmap", ("GetItem",)),
    Spec("index_array", array_index_case(), lambda x, index: x[index].tanh(), lambda x, index: x[index].tanh(),
         "vmap", ("GetItem",)),
    Spec("cat_stack_split", joining_case(), joined(ta.cat, ta.stack), joined(torch.cat, torch.stack), "vmap",
         ("Stack", "GetItem")),
    Spec("where_masked_fill", where_masked_fill_case(),
         lambda a, b, condition, mask, value: (ta.where(condition, a, b * b), a.masked_fill(mask, value) * a),
         lambda a, b, condition, mask, value: (torch.where(condition, a, b * b), a.masked_fill(mask, value) * a),
         "vmap", ("Where",)),
    Spec("matmul", matmul_case(), lambda a, b: (a @ b).tanh(), lambda a, b: (a @ b).tanh(), "vmap", ("MatMul",)),
    Spec("softmax", along_a_dim(), lambda x, dim: F.softmax(x, dim) * x, lambda x, dim: TF.softmax(x, dim) * x,
         "vmap", ("Softmax",)),
    Spec("log_softmax", along_a_dim(), lambda x, dim: F.log_softmax(x, dim) * x,
         lambda x, dim: TF.log_softmax(x, dim) * x, "vmap", ("LogSoftmax",)),
    Spec("layer_norm", layer_norm_case(), lambda x, w, b, **o: F.layer_norm(x, weight=w, bias=b, **o),
         composite_layer_norm, "vmap", ("LayerNorm",)),
    Spec("gelu", gelu_case(), lambda x, approximate: F.gelu(x, approximate=approximate),
         lambda x, approximate: TF.gelu(x, approximate=approximate), "vmap"),
    Spec("cross_entropy", cross_entropy_case(), lambda x, **o: F.cross_entropy(x, **o),
         lambda x, **o: TF.cross_entropy(x, **o), "vmap", ("LogSoftmax",)),
    Spec("attention", attention_case(broadcast_masks=True),
         lambda q, k, v, attn_mask: F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)[0],
         lambda q, k, v, attn_mask: TF.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask), "vmap",
         ("Softmax", "MatMul")),
    # pointwise: the primitives of tinyattn/pointwise.py
    Spec("erfc", one(), ta.erfc, torch.erfc, "api order2 jvp vmap", ("Erfc",)),
    # the distributions' special functions
    Spec("lgamma", one(elements=tt.positive_arrays), lgamma, torch.lgamma, "api order2 jvp vmap", ("LogGamma",)),
    Spec("digamma", one(elements=tt.positive_arrays), digamma, torch.digamma, "api order2 jvp vmap",
         ("Polygamma",)),
    Spec("erfinv", one(elements=_inside_one), ta.erfinv, torch.erfinv, "api order2 jvp vmap", ("Erfinv",)),
    Spec("asin", one(elements=_inside_one), ta.asin, torch.asin, "api order2 jvp vmap", ("Asin",)),
    Spec("acos", one(elements=_inside_one), ta.acos, torch.acos, "api order2 jvp vmap", ("Acos",)),
    Spec("atan", one(), ta.atan, torch.atan, "api order2 jvp vmap", ("Atan",)),
    Spec("atan2", two(), ta.atan2, torch.atan2, "api order2 jvp vmap", ("Atan2",)),
    Spec("log1p", one(elements=tt.positive_arrays), ta.log1p, torch.log1p, "api order2 jvp vmap", ("Log1p",)),
    Spec("expm1", one(), ta.expm1, torch.expm1, "api order2 jvp vmap", ("Expm1",)),
]


def table(name):
    """The rows that the table ``name`` runs, in the registry's order."""
    return [row for row in ROWS if name in row.tables.split()]


def named(rows, *names):
    """The rows of ``rows`` with these names."""
    return [row for row in rows if row.name in names]

