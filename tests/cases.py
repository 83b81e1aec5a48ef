"""The hypothesis strategies that draw the registry's cases, each defined once.

A *case* is ``(arrays, options)``: a list of float64 NumPy arrays (the inputs that get ``requires_grad=True``)
and a dict of keyword options (dims, shapes, boolean masks, integer index and target arrays, numbers). Values
stay away from kinks: nonzero (``tt.arrays``), positive where a log, a root or a power needs it, distinct where
a maximum could tie, and a clamp's values off its bounds.
"""

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tinyattn import testing as tt

SMALL = dict(max_dims=3, max_side=3)
NUMBERS = st.sampled_from([-1.5, 0.5, 2.0, 3])


# ----------------------------------------------------------------------------- arrays alone


def one(shapes=None, elements=tt.arrays):
    """One input array, no options."""
    shapes = tt.shapes(**SMALL) if shapes is None else shapes
    return shapes.flatmap(elements).map(lambda x: ([x], {}))


def two(first=tt.arrays, second=tt.arrays):
    """Two arrays of mutually broadcastable shapes."""
    return tt.broadcastable_shapes(2, **SMALL).flatmap(
        lambda s: st.tuples(first(s[0]), second(s[1]))
    ).map(lambda xy: (list(xy), {}))


def same_shape(n=2):
    """``n`` arrays of one shape."""
    return tt.shapes(**SMALL).flatmap(lambda s: st.tuples(*[tt.arrays(s)] * n)).map(lambda xs: (list(xs), {}))


def apart():
    """Two arrays of one shape that differ everywhere (no ties for a maximum)."""
    return one().flatmap(lambda case: st.tuples(
        st.just(case[0][0]),
        hnp.arrays(np.float64, case[0][0].shape, elements=st.sampled_from([-0.75, -0.5, 0.5, 1.0])),
    )).map(lambda pair: ([pair[0], pair[0] + pair[1]], {}))


def with_scalar(elements=tt.arrays, numbers=NUMBERS):
    """One array and a Python number ``c``."""
    return st.tuples(one(elements=elements), numbers).map(lambda pair: (pair[0][0], {"c": pair[1]}))


def ties(shape):
    """Arrays with many equal elements: ties for amax."""
    return hnp.arrays(np.float64, shape, elements=st.sampled_from([-1.0, 0.5, 1.0]))


@st.composite
def matmul_case(draw):
    """Any operands NumPy's matmul accepts: 1-D, 2-D, batched with broadcasting."""
    shapes = draw(hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, max_side=3))
    a_shape, b_shape = shapes.input_shapes
    return [draw(tt.arrays(a_shape)), draw(tt.arrays(b_shape))], {}


@st.composite
def clamp_case(draw):
    """Bounds that the values (|x| in [0.1, 2]) keep at least 0.01 from: hypothesis may draw a value on a bound
    itself (a simple decimal), where a finite difference straddles the kink and halves the derivative; such a value
    is moved 0.02 past the bound, toward the middle. The kinks are avoided."""
    (x,), _ = draw(one())
    low, high = draw(st.sampled_from([(-0.95, 1.35), (None, 0.55), (-1.45, None)]))
    for bound in (low, high):
        if bound is not None:
            x = np.where(np.abs(x - bound) < 0.01, bound - 0.02 * np.sign(bound), x)
    return [x], {"min": low, "max": high}


@st.composite
def einsum_case(draw):
    """``bqd,bkd,k->bq``: three operands."""
    b, q, k, d = (draw(st.integers(1, 3)) for _ in range(4))
    return [draw(tt.arrays((b, q, d))), draw(tt.arrays((b, k, d))), draw(tt.arrays((k,)))], {}


# ----------------------------------------------------------------------------- along dims: reductions and friends


def dims(ndim, draw):
    """A dim option: None, an int (possibly negative) or a tuple of distinct dims."""
    if ndim == 0:
        return draw(st.sampled_from([None, 0, -1]))
    as_int = st.integers(-ndim, ndim - 1)
    as_tuple = st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).flatmap(
        lambda ds: st.tuples(*[st.sampled_from([d, d - ndim]) for d in ds])
    )
    return draw(st.none() | as_int | as_tuple)


def _reduced_count(shape, dim):
    if dim is None:
        return math.prod(shape)
    dims_ = (dim,) if isinstance(dim, int) else dim
    return math.prod(shape[d] for d in dims_) if shape else 1


@st.composite
def reduction(draw, elements=tt.arrays, corrections=False, min_dims=0):
    """One array, ``dim`` (as ``dims`` draws it) and ``keepdim``; ``corrections``: a ``correction`` that keeps
    ``N - correction > 0`` (var, std)."""
    shape = draw(tt.shapes(min_dims=min_dims, **SMALL))
    dim = dims(len(shape), draw)
    options = {"dim": dim, "keepdim": draw(st.booleans())}
    if corrections:
        options["correction"] = draw(st.integers(0, min(2, _reduced_count(shape, dim) - 1)))
    return [draw(elements(shape))], options


@st.composite
def along_a_dim(draw, high=3.0):
    """One array and one ``dim`` (softmax, log_softmax, cumsum)."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    return [draw(tt.arrays(shape, high=high))], {"dim": draw(st.integers(-len(shape), len(shape) - 1))}


@st.composite
def dim_case(draw, elements=tt.distinct_arrays, keepdim=True):
    """One array, one int ``dim``, and ``keepdim`` (max, min, norm)."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    options = {"dim": draw(st.integers(-len(shape), len(shape) - 1))}
    if keepdim:
        options["keepdim"] = draw(st.booleans())
    return [draw(elements(shape))], options


@st.composite
def topk_case(draw):
    (x,), options = draw(dim_case(keepdim=False))
    options["k"] = draw(st.integers(0, x.shape[options["dim"]]))
    options["largest"] = draw(st.booleans())
    return [x], options


# ----------------------------------------------------------------------------- shapes


@st.composite
def reshape_case(draw):
    shape = draw(tt.shapes(**SMALL))
    target = list(draw(st.permutations(list(shape) + [1] * draw(st.integers(0, 1)))))
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return [draw(tt.arrays(shape))], {"shape": tuple(target)}


@st.composite
def transpose_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    n = len(shape)
    return [draw(tt.arrays(shape))], {"dim0": draw(st.integers(-n, n - 1)), "dim1": draw(st.integers(-n, n - 1))}


@st.composite
def permute_case(draw, min_dims=0):
    shape = draw(tt.shapes(min_dims=min_dims, **SMALL))
    dims_ = draw(st.permutations(range(len(shape))))
    return [draw(tt.arrays(shape))], {"dims": tuple(d - len(shape) if draw(st.booleans()) else d for d in dims_)}


@st.composite
def permute_transpose_case(draw):
    """``permute_case``'s ``dims`` and ``transpose_case``'s ``dim0``, ``dim1`` for one array."""
    (x,), options = draw(permute_case(min_dims=1))
    n = x.ndim
    return [x], {**options, "dim0": draw(st.integers(-n, n - 1)), "dim1": draw(st.integers(-n, n - 1))}


@st.composite
def unsqueeze_case(draw):
    shape = draw(tt.shapes(**SMALL))
    return [draw(tt.arrays(shape))], {"dim": draw(st.integers(-len(shape) - 1, len(shape)))}


@st.composite
def squeeze_case(draw):
    shape = draw(tt.shapes(max_dims=3, max_side=2))  # many size-1 dims
    return [draw(tt.arrays(shape))], {"dim": dims(len(shape), draw)}


@st.composite
def expand_case(draw):
    shape = draw(tt.shapes(**SMALL))
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    rest = [draw(st.sampled_from([n, -1] if n != 1 else [1, 2, 3, -1])) for n in shape]
    return [draw(tt.arrays(shape))], {"size": tuple(lead + rest)}


@st.composite
def unsqueeze_expand_squeeze_case(draw):
    """unsqueeze at ``dim``, expand that axis to ``size``, squeeze the size-1 axes of ``squeeze``."""
    shape = draw(tt.shapes(max_dims=3, max_side=2))  # many size-1 axes
    n = len(shape)
    dim = draw(st.integers(-n - 1, n))
    ones = [d for d, s in enumerate(shape) if s == 1]
    squeeze = draw(st.sampled_from(ones)) if ones else None
    return [draw(tt.arrays(shape))], {"dim": dim, "size": draw(st.integers(1, 3)), "squeeze": squeeze}


@st.composite
def flatten_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    n = len(shape)
    start = draw(st.integers(0, n - 1))
    end = draw(st.integers(start, n - 1))
    start, end = (start - n if draw(st.booleans()) else start), (end - n if draw(st.booleans()) else end)
    return [draw(tt.arrays(shape))], {"start_dim": start, "end_dim": end}


@st.composite
def repeat_case(draw):
    shape = draw(tt.shapes(**SMALL))
    sizes = [draw(st.integers(1, 3)) for _ in range(len(shape) + draw(st.integers(0 if shape else 1, 2)))]
    return [draw(tt.arrays(shape))], {"sizes": tuple(sizes)}


@st.composite
def repeat_interleave_case(draw):
    (x,), options = draw(dim_case(tt.arrays, keepdim=False))
    return [x], {**options, "repeats": draw(st.integers(1, 3))}


@st.composite
def triangle_case(draw):
    shape = draw(tt.shapes(min_dims=2, **SMALL))
    return [draw(tt.arrays(shape))], {"diagonal": draw(st.integers(-2, 2))}


# ----------------------------------------------------------------------------- indexing and masks


@st.composite
def basic_index_case(draw):
    """Integers (possibly negative), slices with positive steps, and ``None``."""
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
    """Integer arrays (with repeats and negative entries): alone, along one dim, or a pair of adjacent ones."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    length = draw(st.integers(1, 5))
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
def mask_index_case(draw):
    """A boolean mask over the leading dims selects elements (or rows)."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    mask = draw(hnp.arrays(np.bool_, shape[: draw(st.integers(1, len(shape)))]))
    return [draw(tt.arrays(shape))], {"index": mask}


@st.composite
def gather_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    dim = draw(st.integers(0, len(shape) - 1))
    index_shape = tuple(draw(st.integers(1, n)) if d != dim else draw(st.integers(1, 4)) for d, n in enumerate(shape))
    index = draw(hnp.arrays(np.int64, index_shape, elements=st.integers(0, shape[dim] - 1)))
    return [draw(tt.arrays(shape))], {"dim": dim, "index": index}


@st.composite
def fill_options(draw, shape):
    """``masked_fill``'s options for an array of ``shape``: a mask that broadcasts to it, and a value."""
    mask_shape = draw(hnp.broadcastable_shapes(shape, max_dims=len(shape), max_side=3))
    value = draw(st.sampled_from([-1e4, 0.0, 2.5]))  # -1e9 would drown finite differences in rounding
    return {"mask": draw(hnp.arrays(np.bool_, mask_shape)), "value": value}


@st.composite
def masked_fill_case(draw):
    shape = draw(tt.shapes(**SMALL))
    return [draw(tt.arrays(shape))], draw(fill_options(shape))


@st.composite
def where_case(draw, with_number=False):
    """``where(condition, a, b)`` with three broadcastable shapes; or ``a`` and a number ``c``."""
    c_shape, a_shape, b_shape = draw(tt.broadcastable_shapes(3, **SMALL))
    options = {"condition": draw(hnp.arrays(np.bool_, c_shape))}
    if with_number:
        return [draw(tt.arrays(a_shape))], {**options, "c": draw(st.sampled_from([-2.0, 0.5]))}
    return [draw(tt.arrays(a_shape)), draw(tt.arrays(b_shape))], options


@st.composite
def where_masked_fill_case(draw):
    """``where_case``, with ``fill_options`` for its first array."""
    (a, b), options = draw(where_case())
    return [a, b], {**options, **draw(fill_options(a.shape))}


# ----------------------------------------------------------------------------- joining and splitting


@st.composite
def cat_case(draw):
    shape = list(draw(tt.shapes(min_dims=1, **SMALL)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        shape[dim] = draw(st.integers(1, 3))
        arrays.append(draw(tt.arrays(tuple(shape))))
    return arrays, {"dim": dim}


@st.composite
def stack_case(draw):
    shape = draw(tt.shapes(**SMALL))
    arrays = [draw(tt.arrays(shape)) for _ in range(draw(st.integers(1, 3)))]
    return arrays, {"dim": draw(st.integers(-len(shape) - 1, len(shape)))}


@st.composite
def split_case(draw):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    length = shape[dim]
    if draw(st.booleans()):
        sections = draw(st.integers(1, length + 1))
    else:
        cuts = sorted(draw(st.lists(st.integers(1, length - 1), max_size=2, unique=True))) if length > 1 else []
        sections = [b - a for a, b in zip([0] + cuts, cuts + [length])]
    return [draw(tt.arrays(shape))], {"sections": sections, "dim": dim}


@st.composite
def chunk_case(draw):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return [draw(tt.arrays(shape))], {"chunks": draw(st.integers(1, 4)), "dim": dim}


@st.composite
def joining_case(draw):
    """Two arrays that concatenate along ``dim``; the result split into ``sections``; a ``stack_dim``."""
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


# ----------------------------------------------------------------------------- writes in place


@st.composite
def inplace_case(draw):
    """``x = a * 1; x[1:] = b * 2``: a non-leaf written in place, then used."""
    shape = draw(tt.shapes(min_dims=1, **SMALL).filter(lambda s: s[0] >= 2))
    return [draw(tt.arrays(shape)), draw(tt.arrays((shape[0] - 1,) + shape[1:]))], {}


@st.composite
def view_write_case(draw):
    """``x = a * 1; x.T[i] = b * 2``: a write through a view, which rewrites its base (``CopySlices``)."""
    n, m = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return [draw(tt.arrays((n, m))), draw(tt.arrays((n,)))], {"row": draw(st.integers(0, m - 1))}


@st.composite
def setitem_case(draw):
    """``y = x * 1; y[mask] = value`` with ``value`` a number or a differentiable tensor."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    mask = draw(hnp.arrays(np.bool_, shape))
    if draw(st.booleans()):
        # a large fill, but not so large that the finite differences' sum of outputs loses the step
        # (1e6 · 1e-16 / 1e-6 ≈ 1e-4 of rounding, above gradcheck's tolerance)
        return [draw(tt.arrays(shape))], {"mask": mask, "value": draw(st.sampled_from([-1e4, 0.0, 2.5]))}
    return [draw(tt.arrays(shape)), draw(tt.arrays(()))], {"mask": mask}


# ----------------------------------------------------------------------------- the functionals


@st.composite
def gelu_case(draw):
    shape = draw(tt.shapes(**SMALL))
    return [draw(tt.arrays(shape, high=3.0))], {"approximate": draw(st.sampled_from(["none", "tanh"]))}


@st.composite
def layer_norm_case(draw):
    """x, weight and bias of the trailing ``normalized_shape``; ``eps``."""
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    normalized = shape[len(shape) - draw(st.integers(1, len(shape))):]
    arrays = [draw(tt.arrays(shape)), draw(tt.arrays(normalized)), draw(tt.arrays(normalized))]
    return arrays, {"normalized_shape": normalized, "eps": draw(st.sampled_from([1e-5, 1e-2]))}


@st.composite
def cross_entropy_case(draw):
    """Logits ``(N, C)`` or ``(N, C, d)``; targets with some positions ignored, never all of them."""
    n, c = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    extra = tuple(draw(st.lists(st.integers(1, 3), max_size=1)))
    ignore_index = draw(st.sampled_from([-100, 1]))
    target = draw(hnp.arrays(np.int64, (n,) + extra, elements=st.integers(0, c - 1)))
    ignored = draw(hnp.arrays(np.bool_, target.shape))
    ignored.flat[0] = False
    target = np.where(ignored, ignore_index, target)
    if ignore_index == 1:  # a target of class 1 is ignored too: keep one that counts
        target.flat[0] = 0
    return [draw(tt.arrays((n, c) + extra, high=3.0))], {
        "target": target, "ignore_index": ignore_index, "reduction": draw(st.sampled_from(["mean", "sum", "none"])),
        "label_smoothing": draw(st.sampled_from([0.0, 0.1]))}


@st.composite
def embedding_case(draw):
    num, dim = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    indices = draw(hnp.arrays(np.int64, draw(tt.shapes(min_dims=1, max_dims=2, max_side=4)),
                              elements=st.integers(0, num - 1)))  # repeats: gradients add up
    return [draw(tt.arrays((num, dim)))], {"indices": indices}


@st.composite
def attention_case(draw, broadcast_masks=False):
    """q ``(…, Lq, E)``, k ``(…, Lk, E)``, v ``(…, Lk, Ev)`` and ``attn_mask``: boolean (every query keeps a key),
    float, or none; then ``is_causal`` and ``need_weights``, and a boolean mask may have one fully masked row
    (whose output and gradients are zeros). ``broadcast_masks``: what torch.func.vmap can compare, a mask always,
    of shape ``(Lq, Lk)``, ``(1, Lk)`` or ``(…, Lq, Lk)``, no fully masked row, no ``is_causal``, no weights."""
    lead = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    lq, lk, e, ev = (draw(st.integers(1, 3)) for _ in range(4))
    arrays = [draw(tt.arrays(lead + (lq, e))), draw(tt.arrays(lead + (lk, e))), draw(tt.arrays(lead + (lk, ev)))]
    if broadcast_masks:
        mask_shape = draw(st.sampled_from([(lq, lk), (1, lk), lead + (lq, lk)]))
        kind = draw(st.sampled_from(["bool", "float"]))
    else:
        mask_shape = (lq, lk)
        kind = draw(st.sampled_from(["none", "bool", "bool_empty_row", "float"]))
    mask = None
    if kind.startswith("bool"):
        mask = draw(hnp.arrays(np.bool_, mask_shape))
        mask[..., 0] = True  # every query keeps a key…
        if kind == "bool_empty_row":
            mask[draw(st.integers(0, lq - 1))] = False  # …but one, whose output and gradients are zeros
    elif kind == "float":
        mask = draw(hnp.arrays(np.float64, mask_shape, elements=st.floats(-2.0, 2.0)))
    if broadcast_masks:
        return arrays, {"attn_mask": mask}
    return arrays, {"attn_mask": mask, "is_causal": draw(st.booleans()), "need_weights": draw(st.booleans())}
