"""The functions ``ta.func``'s tests transform: one table of cases, each a hypothesis strategy that draws the
float inputs (float64 arrays, every one differentiated) and the options (dims, masks, index and target arrays,
shared by every example of a batch), our function and PyTorch's, built from the primitives and functionals.

Helpers shared by ``test_func_transforms`` and ``test_func_vmap``: converting a drawn case to tensors on
either side, and comparing trees of results (same nesting, same shapes, close values).
"""

from typing import NamedTuple

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
import tinyattn.nn.functional as F
from tinyattn import testing as tt

TF = torch.nn.functional
SMALL = dict(max_dims=3, max_side=3)
RTOL, ATOL = 1e-9, 1e-11


class Spec(NamedTuple):
    name: str
    case: object  # strategy of (list of float64 arrays, dict of options)
    ours: object  # (*tensors, **options) -> tensor or tuple of tensors
    theirs: object  # the same in PyTorch


# ----------------------------------------------------------------------------- case strategies


def _one(shapes=None, elements=tt.arrays):
    shapes = tt.shapes(**SMALL) if shapes is None else shapes
    return shapes.flatmap(elements).map(lambda x: ([x], {}))


def _broadcasting(count=2, **options):
    return tt.broadcastable_shapes(count, **{**SMALL, **options}).flatmap(
        lambda shapes: st.tuples(*[tt.arrays(s) for s in shapes])).map(lambda xs: (list(xs), {}))


@st.composite
def reduction_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    n = len(shape)
    dim = draw(st.none() | st.integers(-n, n - 1)
               | st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True).map(tuple))
    return [draw(tt.distinct_arrays(shape))], {"dim": dim, "keepdim": draw(st.booleans())}


@st.composite
def reshape_case(draw):
    shape = draw(tt.shapes(**SMALL))
    target = list(draw(st.permutations(list(shape) + [1] * draw(st.integers(0, 1)))))
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return [draw(tt.arrays(shape))], {"shape": tuple(target)}


@st.composite
def permute_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    n = len(shape)
    dims = tuple(d - n if draw(st.booleans()) else d for d in draw(st.permutations(range(n))))
    return [draw(tt.arrays(shape))], {"dims": dims, "dim0": draw(st.integers(-n, n - 1)),
                                      "dim1": draw(st.integers(-n, n - 1))}


@st.composite
def expand_case(draw):
    """unsqueeze at ``dim``, expand that axis to ``size``, squeeze the size-1 axes of ``squeeze``."""
    shape = draw(tt.shapes(max_dims=3, max_side=2))  # many size-1 axes
    n = len(shape)
    dim = draw(st.integers(-n - 1, n))
    ones = [d for d, s in enumerate(shape) if s == 1]
    squeeze = draw(st.sampled_from(ones)) if ones else None
    return [draw(tt.arrays(shape))], {"dim": dim, "size": draw(st.integers(1, 3)), "squeeze": squeeze}


def unsqueeze_expand_squeeze(x, dim, size, squeeze):
    y = x.unsqueeze(dim)
    sizes = list(y.shape)
    sizes[dim] = size
    expanded = y.expand(*sizes)
    squeezed = x.squeeze() if squeeze is None else x.squeeze(squeeze)
    return expanded * 2.0, squeezed.tanh()


@st.composite
def flatten_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    n = len(shape)
    start = draw(st.integers(0, n - 1))
    end = draw(st.integers(start, n - 1))
    return [draw(tt.arrays(shape))], {"start_dim": start - n if draw(st.booleans()) else start,
                                      "end_dim": end - n if draw(st.booleans()) else end}


@st.composite
def basic_index_case(draw):
    """Integers (negative too), slices with steps, ``None``."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    index = []
    for n in shape[: draw(st.integers(1, len(shape)))]:
        bound = st.none() | st.integers(-n, n)
        index.append(draw(st.integers(-n, n - 1) | st.builds(slice, bound, bound, st.none() | st.integers(1, 2))))
    if draw(st.booleans()):
        index.insert(draw(st.integers(0, len(index))), None)
    return [draw(tt.arrays(shape))], {"index": tuple(index)}


@st.composite
def array_index_case(draw):
    """Integer arrays (repeats, negatives): alone, after slices along one dim, or a pair of adjacent ones."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    length = draw(st.integers(1, 4))
    indices = lambda n: hnp.arrays(np.int64, length, elements=st.integers(-n, n - 1))  # noqa: E731
    form = draw(st.sampled_from(["alone", "along", "pair"] if len(shape) >= 2 else ["alone", "along"]))
    if form == "alone":
        index = draw(indices(shape[0]))
    elif form == "along":
        dim = draw(st.integers(0, len(shape) - 1))
        index = (slice(None),) * dim + (draw(indices(shape[dim])),)
    else:
        index = (draw(indices(shape[0])), draw(indices(shape[1])))
    return [draw(tt.arrays(shape))], {"index": index}


@st.composite
def joining_case(draw):
    """Two arrays that concatenate along ``dim``; the result split into ``sections``."""
    shape = list(draw(tt.shapes(min_dims=1, **SMALL)))
    n = len(shape)
    dim = draw(st.integers(-n, n - 1))
    a_shape, b_shape = list(shape), list(shape)
    b_shape[dim] = draw(st.integers(1, 3))
    total = a_shape[dim] + b_shape[dim]
    cuts = sorted(draw(st.lists(st.integers(1, total - 1), max_size=2, unique=True)))
    sections = [b - a for a, b in zip([0] + cuts, cuts + [total])]
    return [draw(tt.arrays(tuple(a_shape))), draw(tt.arrays(tuple(b_shape)))], {
        "dim": dim, "sections": draw(st.sampled_from([sections, draw(st.integers(1, total))])),
        "stack_dim": draw(st.integers(-n - 1, n))}


def joined(cat, stack):
    def function(a, b, dim, sections, stack_dim):
        whole = cat([a, b.tanh()], dim)
        return (stack([a, a * a], stack_dim),) + tuple(whole.split(sections, dim))
    return function


@st.composite
def where_case(draw):
    c_shape, a_shape, b_shape = draw(tt.broadcastable_shapes(3, **SMALL))
    a = draw(tt.arrays(a_shape))
    return [a, draw(tt.arrays(b_shape))], {
        "condition": draw(hnp.arrays(np.bool_, c_shape)),
        "mask": draw(hnp.arrays(np.bool_, draw(hnp.broadcastable_shapes(a_shape, max_dims=len(a_shape), max_side=3)))),
        "value": draw(st.sampled_from([-1e4, 0.0, 2.5]))}


@st.composite
def matmul_case(draw):
    """Any operands matmul takes: 1-D, 2-D, batched with broadcasting."""
    shapes = draw(hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, max_side=3))
    a_shape, b_shape = shapes.input_shapes
    return [draw(tt.arrays(a_shape)), draw(tt.arrays(b_shape))], {}


@st.composite
def along_a_dim(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    return [draw(tt.arrays(shape, high=3.0))], {"dim": draw(st.integers(-len(shape), len(shape) - 1))}


@st.composite
def layer_norm_case(draw):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    normalized = shape[len(shape) - draw(st.integers(1, len(shape))):]
    return [draw(tt.arrays(shape)), draw(tt.arrays(normalized)), draw(tt.arrays(normalized))], {
        "normalized_shape": normalized, "eps": draw(st.sampled_from([1e-5, 1e-2]))}


@st.composite
def gelu_case(draw):
    shape = draw(tt.shapes(**SMALL))
    return [draw(tt.arrays(shape, high=3.0))], {"approximate": draw(st.sampled_from(["none", "tanh"]))}


@st.composite
def cross_entropy_case(draw):
    """Logits ``(N, C)`` or ``(N, C, d)``, targets with ignored positions (never all of them)."""
    n, c = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    extra = tuple(draw(st.lists(st.integers(1, 3), max_size=1)))
    target = draw(hnp.arrays(np.int64, (n,) + extra, elements=st.integers(0, c - 1)))
    ignored = draw(hnp.arrays(np.bool_, target.shape))
    ignored.flat[0] = False
    target = np.where(ignored, -100, target)
    return [draw(tt.arrays((n, c) + extra, high=3.0))], {
        "target": target, "reduction": draw(st.sampled_from(["mean", "sum", "none"])),
        "label_smoothing": draw(st.sampled_from([0.0, 0.1]))}


@st.composite
def attention_case(draw):
    """``(…, L, E)`` query, key and value; a boolean mask (every query keeps a key) or a float one."""
    lead = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    lq, lk, e, ev = (draw(st.integers(1, 3)) for _ in range(4))
    arrays = [draw(tt.arrays(lead + (lq, e))), draw(tt.arrays(lead + (lk, e))), draw(tt.arrays(lead + (lk, ev)))]
    mask_shape = draw(st.sampled_from([(lq, lk), (1, lk), lead + (lq, lk)]))
    if draw(st.booleans()):
        mask = draw(hnp.arrays(np.bool_, mask_shape))
        mask[..., 0] = True
    else:
        mask = draw(hnp.arrays(np.float64, mask_shape, elements=st.sampled_from([0.0, -1.0, 0.5])))
    return arrays, {"mask": mask}


# ----------------------------------------------------------------------------- the table


def composite_layer_norm(x, w, b, normalized_shape, eps):
    """torch's layer_norm written out: torch 2.13's fused layer_norm has wrong second derivatives (the mixed
    weight-input block lacks its centring term: its rows do not sum to 0, as shift invariance demands)."""
    dims = tuple(range(-len(normalized_shape), 0))
    centred = x - x.mean(dims, keepdim=True)
    return centred / torch.sqrt(x.var(dims, keepdim=True, correction=0) + eps) * w + b


def _reductions(x, dim, keepdim, module):
    every = tuple(range(x.ndim)) if dim is None else dim
    if module is ta:
        return x.sum(dim, keepdim), x.mean(dim=dim, keepdim=keepdim), x.amax(dim, keepdim), \
            x.var(dim, keepdim=keepdim, correction=0)
    return x.sum(every, keepdim), x.mean(dim=every, keepdim=keepdim), x.amax(every, keepdim), \
        x.var(every, keepdim=keepdim, correction=0)


SPECS = [
    Spec("elementwise", _one(),
         lambda x: x.exp() * x.tanh() + x.sigmoid() * x.abs() + x.abs().sqrt() - x.abs().log() + x.relu() ** 2 - x,
         lambda x: x.exp() * x.tanh() + x.sigmoid() * x.abs() + x.abs().sqrt() - x.abs().log() + x.relu() ** 2 - x),
    Spec("binary_broadcast", _broadcasting(),
         lambda a, b: a * b - a / b + (a + b) ** 2 + a.abs() ** b - 2.0 / a,
         lambda a, b: a * b - a / b + (a + b) ** 2 + a.abs() ** b - 2.0 / a),
    Spec("reductions", reduction_case(), lambda x, **o: _reductions(x, **o, module=ta),
         lambda x, **o: _reductions(x, **o, module=torch)),
    Spec("reshape", reshape_case(), lambda x, shape: x.reshape(shape) * x.sum(),
         lambda x, shape: x.reshape(shape) * x.sum()),
    Spec("permute_transpose", permute_case(),
         lambda x, dims, dim0, dim1: (x.permute(*dims), x.transpose(dim0, dim1) ** 2),
         lambda x, dims, dim0, dim1: (x.permute(dims), x.transpose(dim0, dim1) ** 2)),
    Spec("unsqueeze_expand_squeeze", expand_case(), unsqueeze_expand_squeeze, unsqueeze_expand_squeeze),
    Spec("flatten", flatten_case(), lambda x, **o: x.flatten(**o) * x.flatten(**o),
         lambda x, **o: x.flatten(**o) * x.flatten(**o)),
    Spec("index_basic", basic_index_case(), lambda x, index: x[index] * x[index],
         lambda x, index: x[index] * x[index]),
    Spec("index_array", array_index_case(), lambda x, index: x[index].tanh(), lambda x, index: x[index].tanh()),
    Spec("cat_stack_split", joining_case(), joined(ta.cat, ta.stack), joined(torch.cat, torch.stack)),
    Spec("where_masked_fill", where_case(),
         lambda a, b, condition, mask, value: (ta.where(condition, a, b * b), a.masked_fill(mask, value) * a),
         lambda a, b, condition, mask, value: (torch.where(condition, a, b * b), a.masked_fill(mask, value) * a)),
    Spec("matmul", matmul_case(), lambda a, b: (a @ b).tanh(), lambda a, b: (a @ b).tanh()),
    Spec("softmax", along_a_dim(), lambda x, dim: F.softmax(x, dim) * x, lambda x, dim: TF.softmax(x, dim) * x),
    Spec("log_softmax", along_a_dim(), lambda x, dim: F.log_softmax(x, dim) * x,
         lambda x, dim: TF.log_softmax(x, dim) * x),
    Spec("layer_norm", layer_norm_case(), lambda x, w, b, **o: F.layer_norm(x, weight=w, bias=b, **o),
         composite_layer_norm),
    Spec("gelu", gelu_case(), lambda x, approximate: F.gelu(x, approximate=approximate),
         lambda x, approximate: TF.gelu(x, approximate=approximate)),
    Spec("cross_entropy", cross_entropy_case(), lambda x, **o: F.cross_entropy(x, **o),
         lambda x, **o: TF.cross_entropy(x, **o)),
    Spec("attention", attention_case(),
         lambda q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[0],
         lambda q, k, v, mask: TF.scaled_dot_product_attention(q, k, v, attn_mask=mask)),
]
IDS = [spec.name for spec in SPECS]


# ----------------------------------------------------------------------------- both sides of a case


def convert(value, make):
    """Arrays inside ``value`` (a tree of tuples, lists and dicts) made tensors by ``make``."""
    if isinstance(value, np.ndarray):
        return make(value)
    if isinstance(value, (tuple, list)):
        return type(value)(convert(v, make) for v in value)
    if isinstance(value, dict):
        return {k: convert(v, make) for k, v in value.items()}
    return value


def ours(a):
    return ta.tensor(np.array(a))


def theirs(a):
    return torch.from_numpy(np.array(a))


def functions(spec, options):
    """Our function and PyTorch's of the float inputs alone, the options bound."""
    ours_options, their_options = convert(options, ours), convert(options, theirs)
    return (lambda *xs: spec.ours(*xs, **ours_options)), (lambda *xs: spec.theirs(*xs, **their_options))


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def contract(outputs, directions):
    """``Σ_k ⟨outputs_k, directions_k⟩``: a number from any outputs, along random directions (never ``sum()``
    alone, whose gradient hides a softmax's)."""
    total = None
    for out, u in zip(as_tuple(outputs), directions):
        term = (out * u).sum()
        total = term if total is None else total + term
    return total


def numpy_of(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    assert isinstance(t, ta.Tensor), f"expected a tensor, got {type(t).__name__}"
    return t.numpy()


def assert_trees_close(got, expected, rtol=RTOL, atol=ATOL, where="result"):
    """``got`` (ours) has ``expected``'s nesting (tuples, lists, dicts), shapes, and close values."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)), f"{where}: expected a {type(expected).__name__}, got {type(got)}"
        assert len(got) == len(expected), f"{where}: {len(got)} entries, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_trees_close(g, e, rtol, atol, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(expected), f"{where}: keys {got!r}"
        for k in expected:
            assert_trees_close(got[k], expected[k], rtol, atol, f"{where}[{k!r}]")
    else:
        assert isinstance(got, ta.Tensor), f"{where}: expected a tensor, got {type(got).__name__}"
        e = numpy_of(expected)
        assert tuple(got.shape) == e.shape, f"{where}: shape {tuple(got.shape)}, expected {e.shape}"
        np.testing.assert_allclose(got.numpy(), e, rtol=rtol, atol=atol, err_msg=where)
