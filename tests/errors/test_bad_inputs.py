"""Bad inputs at the public API, checked against PyTorch: one rule for every entry point.

For each entry point in ``ENTRIES`` a hypothesis strategy draws arguments — wrong and empty shapes,
0-d tensors, bool / integer / float dtypes, NaN and infinities, out-of-range dims and indices,
sizes and hyperparameters, non-tensor arguments — and the same call runs on torch and on
tinyattn. Where torch raises, tinyattn must raise ``ValueError``, ``TypeError``, ``IndexError`` or
``RuntimeError`` with the entry point's name in the message; where torch returns, tinyattn must
return the same values, shape and dtype. The tests at the end pin single examples, each of which would
otherwise give a silently wrong answer or a Python/NumPy internal error.

Where torch's own answer is not the rule, the strategies leave the input out, each with a comment:

- torch skips its checks on some empty inputs: ``tensor(0.).expand(0, -1)`` has a size of -1;
  ``scaled_dot_product_attention`` takes any shapes once a tensor is empty; ``cat`` skips a ``(0,)``
  tensor whatever its dims; softmax-like functions take an empty integer tensor (tinyattn always
  refuses non-floating input there; ``check_the_rule`` allows that);
- attention over zero keys, or a NaN beside a fully masked row, gives NaN in torch and zeros here, the
  library's documented rule; ``gelu(inf)`` is NaN in torch, inf here; cross entropy over zero classes;
- ``F.linear``'s broadcasting of an unusual bias depends on torch's kernel (its rules differ between 2-D
  and 3-D inputs): drawn with 2-D inputs only;
- SGD accepts a NaN ``lr``, ``momentum`` or ``weight_decay`` in torch; tinyattn refuses them, as Adam does.
"""

import math
from dataclasses import dataclass, field

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import optim

ERRORS = (ValueError, TypeError, IndexError, RuntimeError)
NAN, INF = math.nan, math.inf
EXAMPLES = settings().max_examples * 3  # cheap calls: three times the profile's count (45 under ``ci``)


class Raw:
    """An argument passed as it is to both libraries (a list or an array where a tensor belongs)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Raw({self.value!r})"


def _convert(arg, make):
    if isinstance(arg, Raw):
        return arg.value
    if isinstance(arg, np.ndarray):
        return make(arg)
    if isinstance(arg, list):
        return [_convert(a, make) for a in arg]
    return arg


def _to_torch(array):
    return torch.from_numpy(array.copy())


def _to_ta(array):
    return ta.tensor(array.copy())


# ----------------------------------------------------------------------------- strategies

FLOATS = st.floats(-50, 50, width=32) | st.sampled_from([NAN, INF, -INF, 0.0])
DTYPES = st.sampled_from([np.float32, np.float64, np.int64, np.bool_, np.complex64])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
DIMS = st.integers(-4, 4)


def _elements(dtype):
    if dtype == np.complex64:
        return st.complex_numbers(max_magnitude=50, width=64)
    if dtype == np.bool_:
        return st.booleans()
    if dtype == np.int64:
        return st.integers(-5, 5)
    return FLOATS


@st.composite
def arrays(draw, dtype=None, shape=None, finite=False):
    dtype = draw(DTYPES if dtype is None else dtype) if not isinstance(dtype, type) else dtype
    shape = draw(SHAPES if shape is None else shape) if not isinstance(shape, tuple) else shape
    elements = st.floats(-50, 50, width=32) if finite and dtype not in (np.bool_, np.int64) else _elements(dtype)
    return draw(hnp.arrays(dtype, shape, elements=elements))


floats_only = st.sampled_from([np.float32, np.float64])


@st.composite
def tensor_or_raw(draw, dtype=None, shape=None):
    """Mostly an array (a tensor for both libraries), sometimes the same data as a plain list."""
    array = draw(arrays(dtype, shape))
    return Raw(array.tolist()) if draw(st.integers(0, 9)) == 0 else array


@st.composite
def same_dtype_list(draw):
    dtype = draw(DTYPES)
    items = draw(st.lists(arrays(dtype), min_size=0, max_size=3))
    assume(not any(a.shape == (0,) for a in items))  # torch's legacy rule: cat skips a (0,) tensor whatever dim
    return items


sizes = st.integers(-2, 4)
# a module's input: its parameters' float32, or no float at all (float64 into a float32 module is promoted
# here and refused by torch: mixing float dtypes is the type-promotion rules' part)
MODULE_DTYPES = st.sampled_from([np.float32, np.int64, np.bool_, np.complex64])
SEQUENCES = tensor_or_raw(MODULE_DTYPES, st.sampled_from([(2, 3, 4), (1, 0, 4), (2, 3, 5)]))  # (B, L, E = 4)
hyper = st.floats(-1.0, 2.0) | st.sampled_from([NAN, INF, -INF, 0.0, 1.0])


@st.composite
def matmul_args(draw):
    """Two float operands, sometimes of two dtypes (torch refuses those, but not when one is empty: it
    skips its checks there)."""
    a, b = draw(arrays(floats_only)), draw(arrays(floats_only))
    assume(a.dtype == b.dtype or (a.size and b.size))
    return a, b


@st.composite
def linear_args(draw):
    dtype = draw(floats_only)
    in_f, out_f = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    x_shape = draw(st.sampled_from([(2, in_f), (in_f,), (2, in_f + 1), (1, 2, in_f)]))
    w_shape = draw(st.sampled_from([(out_f, in_f), (out_f, in_f + 1)]))
    b_shape = draw(st.sampled_from([None, (out_f,), (1, out_f), (out_f + 1,), (), (out_f, 1)]))
    if b_shape not in (None, (out_f,)):  # torch's rules for other biases depend on its kernels; 2-D input only
        x_shape = (2,) + x_shape[-1:]
    bias = None if b_shape is None else draw(arrays(dtype, b_shape))
    x_dtype = draw(st.sampled_from([dtype, dtype, np.float32, np.float64]))  # sometimes not the weight's: refused
    return draw(arrays(x_dtype, x_shape)), draw(arrays(dtype, w_shape)), bias


@st.composite
def attention_args(draw):
    dtype = draw(floats_only)
    B, Lq = draw(st.integers(1, 3)), draw(st.integers(1, 3))  # (torch skips its shape checks on empty inputs)
    Lk, E = draw(st.integers(1, 3)), draw(st.integers(0, 3))  # (Lk = 0: torch NaN, tinyattn zeros, as documented)
    # finite values: a NaN beside a fully masked row gives NaN in torch, zeros here (the documented rule)
    q = draw(arrays(dtype, (B, Lq, E), finite=True))
    k = draw(arrays(dtype, (B, Lk, draw(st.sampled_from([E, E + 1]))), finite=True))
    v = draw(arrays(dtype, (B, draw(st.sampled_from([Lk, Lk + 1])), 2), finite=True))
    assume((q.size and k.size and v.size) or (k.shape[-1] == E and v.shape[-2] == Lk))
    mask_shape = draw(st.sampled_from([None, (Lq, Lk), (B, 1, Lk), (Lq + 1, Lk), (B, Lq)]))
    mask = None if mask_shape is None else draw(arrays(draw(st.sampled_from([np.bool_, dtype])), mask_shape))
    if mask is not None and mask.dtype != np.bool_:
        mask = np.nan_to_num(mask, nan=0.0)
    return q, k, v, mask


@st.composite
def cross_entropy_args(draw):
    N, C = draw(st.integers(0, 3)), draw(st.integers(1, 3))  # (no logits of 0 classes: see the module's notes)
    logits = draw(arrays(draw(DTYPES), draw(st.sampled_from([(N, C), (C,), (N, C, 2), ()]))))
    target_shape = draw(st.sampled_from([(N,), (), (N, 2), (N + 1,)]))
    assume(logits.ndim != 1 or target_shape != (1,))  # (torch takes a (1,) target for (C,) logits)
    target = draw(hnp.arrays(np.int64, target_shape, elements=st.integers(-1, C)))
    return logits, target


@st.composite
def embedding_args(draw):
    rows = draw(st.integers(1, 4))
    weight = draw(arrays(draw(floats_only), draw(st.sampled_from([(rows, 2), (rows,), (rows, 2, 1)]))))
    index = draw(hnp.arrays(draw(st.sampled_from([np.int64, np.float32])), draw(SHAPES),
                            elements=st.integers(-1, rows)))
    padding_idx = draw(st.none() | st.integers(-rows - 1, rows))
    return index, weight, padding_idx


def _finite(array):
    return not isinstance(array, np.ndarray) or array.dtype.kind != "f" or bool(np.isfinite(array).all())


def _not_torchs_expand_bug(args):
    """torch 2.x returns a tensor of size -1 for ``tensor(0.).expand(0, -1)`` (a negative size beside a 0,
    or on an empty tensor, skips its checks): tinyattn refuses those sizes, as torch does otherwise."""
    x, sizes = args
    return not ((0 in sizes or x.size == 0) and any(n < 0 for n in sizes))


# ----------------------------------------------------------------------------- the table


@dataclass
class Entry:
    """One public entry point: ``name`` (what its errors must say), a strategy of argument tuples,
    and the call on each library, which takes the converted arguments."""

    name: str
    args: st.SearchStrategy
    torch_call: object
    ta_call: object
    refuses_nan: bool = field(default=False)  # tinyattn refuses a NaN hyperparameter that torch accepts
    atol: float = field(default=1e-5)


ENTRIES = [
    Entry("cat", st.tuples(same_dtype_list(), DIMS),
          lambda xs, d: torch.cat(xs, d), lambda xs, d: ta.cat(xs, d)),
    Entry("stack", st.tuples(same_dtype_list(), DIMS),
          lambda xs, d: torch.stack(xs, d), lambda xs, d: ta.stack(xs, d)),
    Entry("split", st.tuples(arrays(), st.integers(-1, 3) | st.lists(st.integers(-1, 3), max_size=3), DIMS),
          lambda x, s, d: x.split(s, d), lambda x, s, d: x.split(s, d)),
    Entry("chunk", st.tuples(arrays(), st.integers(-1, 4), DIMS),
          lambda x, c, d: x.chunk(c, d), lambda x, c, d: x.chunk(c, d)),
    Entry("flatten", st.tuples(arrays(), DIMS, DIMS),
          lambda x, a, b: x.flatten(a, b), lambda x, a, b: x.flatten(a, b)),
    Entry("reshape", st.tuples(arrays(), st.lists(st.integers(-2, 4), max_size=3)),
          lambda x, s: x.reshape(s), lambda x, s: x.reshape(s)),
    Entry("transpose", st.tuples(arrays(), DIMS, DIMS),
          lambda x, a, b: x.transpose(a, b), lambda x, a, b: x.transpose(a, b)),
    Entry("permute", st.tuples(arrays(), st.lists(DIMS, max_size=3)),
          lambda x, d: x.permute(d), lambda x, d: x.permute(d)),
    Entry("unsqueeze", st.tuples(arrays(), DIMS),
          lambda x, d: x.unsqueeze(d), lambda x, d: x.unsqueeze(d)),
    Entry("squeeze", st.tuples(arrays(), DIMS),
          lambda x, d: x.squeeze(d), lambda x, d: x.squeeze(d)),
    Entry("expand", st.tuples(arrays(), st.lists(st.integers(-2, 3), max_size=4)).filter(_not_torchs_expand_bug),
          lambda x, s: x.expand(s), lambda x, s: x.expand(s)),
    Entry("sum", st.tuples(arrays(), st.none() | DIMS | st.lists(DIMS, max_size=3).map(tuple)),
          lambda x, d: x.sum(d) if d is not None else x.sum(), lambda x, d: x.sum(d)),
    Entry("mean", st.tuples(arrays(), st.none() | DIMS),
          lambda x, d: x.mean(d) if d is not None else x.mean(), lambda x, d: x.mean(d)),
    Entry("amax", st.tuples(arrays(dtype=floats_only), DIMS),
          lambda x, d: x.amax(d), lambda x, d: x.amax(d)),
    Entry("getitem", st.tuples(arrays(), st.integers(-4, 4) | st.tuples(st.integers(-3, 3), st.integers(-3, 3))),
          lambda x, i: x[i], lambda x, i: x[i]),
    Entry("masked_fill", st.tuples(arrays(np.float32), arrays(), st.sampled_from([0.0, -INF, NAN])),
          lambda x, m, v: x.masked_fill(m, v), lambda x, m, v: x.masked_fill(m, v)),
    Entry("matmul", matmul_args(),
          lambda a, b: a @ b, lambda a, b: a @ b),
    Entry("neg", st.tuples(arrays()), lambda x: -x, lambda x: -x),
    Entry("abs", st.tuples(arrays()), lambda x: x.abs(), lambda x: x.abs()),
    Entry("relu", st.tuples(arrays()), lambda x: x.relu(), lambda x: x.relu()),
    Entry("sub", st.tuples(arrays(np.bool_), arrays(np.bool_)), lambda a, b: a - b, lambda a, b: a - b),
    Entry("softmax", st.tuples(tensor_or_raw(), DIMS),
          lambda x, d: torch.softmax(x, d), lambda x, d: F.softmax(x, d)),
    Entry("log_softmax", st.tuples(tensor_or_raw(), DIMS),
          lambda x, d: torch.log_softmax(x, d), lambda x, d: F.log_softmax(x, d)),
    Entry("gelu", st.tuples(tensor_or_raw().filter(_finite)),  # (torch: gelu(inf) = nan; tinyattn: inf)
          lambda x: torch.nn.functional.gelu(x), lambda x: F.gelu(x)),
    Entry("layer_norm", st.tuples(tensor_or_raw(shape=st.sampled_from([(2, 3), (3,), (0, 3), ()])),
                                  st.sampled_from([(3,), (2, 3), (4,)]), st.sampled_from([1e-5, 0.1])),
          lambda x, s, eps: torch.nn.functional.layer_norm(x, s, eps=eps),
          lambda x, s, eps: F.layer_norm(x, s, eps=eps)),  # a constant row gives 0, as torch's does
    Entry("dropout", st.tuples(tensor_or_raw(), hyper, st.booleans()),
          lambda x, p, t: torch.nn.functional.dropout(x, p, t and p == 0.0),  # (deterministic calls only)
          lambda x, p, t: F.dropout(x, p, t and p == 0.0)),
    Entry("linear", linear_args(),
          lambda x, w, b: torch.nn.functional.linear(x, w, b), lambda x, w, b: F.linear(x, w, b)),
    Entry("embedding", embedding_args(),
          lambda i, w, p: torch.nn.functional.embedding(i, w, p), lambda i, w, p: F.embedding(i, w, p)),
    Entry("cross_entropy", cross_entropy_args(),
          lambda z, t: torch.nn.functional.cross_entropy(z, t), lambda z, t: F.cross_entropy(z, t)),
    Entry("scaled_dot_product_attention", attention_args(),
          lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(q, k, v, m),
          lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, need_weights=False)[0]),
    Entry("zeros", st.tuples(st.lists(sizes | st.sampled_from([1.5, NAN]), max_size=3)),
          lambda s: torch.zeros(s), lambda s: ta.zeros(s)),
    Entry("randn", st.tuples(st.lists(sizes, max_size=3)),
          lambda s: torch.randn(s).shape, lambda s: ta.randn(s).shape),
    Entry("full", st.tuples(st.lists(sizes, max_size=3), hyper | st.booleans() | st.integers(-3, 3)),
          lambda s, v: torch.full(s, v), lambda s, v: ta.full(s, v)),
    Entry("arange", st.tuples(*[st.integers(-3, 3) | st.sampled_from([0.5, -0.5, 2.5, NAN, INF, -INF])] * 3),
          lambda a, b, c: torch.arange(a, b, c), lambda a, b, c: ta.arange(a, b, c)),
    Entry("size", st.tuples(arrays(), DIMS), lambda x, d: x.size(d), lambda x, d: x.size(d)),
    Entry("Linear", st.tuples(sizes, sizes),
          lambda i, o: torch.nn.Linear(i, o).weight.shape, lambda i, o: nn.Linear(i, o).weight.shape),
    Entry("Embedding", st.tuples(sizes, sizes, st.none() | st.integers(-5, 5)),
          lambda n, d, p: torch.nn.Embedding(n, d, p).weight.shape,
          lambda n, d, p: nn.Embedding(n, d, p).weight.shape),
    Entry("LayerNorm", st.tuples(sizes),
          lambda n: torch.nn.LayerNorm(n).weight.shape, lambda n: nn.LayerNorm(n).weight.shape),
    Entry("MultiHeadAttention", st.tuples(sizes, sizes),
          lambda e, h: torch.nn.MultiheadAttention(e, h).out_proj.weight.shape,
          lambda e, h: nn.MultiHeadAttention(e, h).out_proj.weight.shape),
    Entry("TransformerEncoderLayer", st.tuples(st.sampled_from([0, 2, 4]), st.integers(0, 2), sizes),
          lambda d, h, f: torch.nn.TransformerEncoderLayer(d, h, f).linear1.weight.shape,
          lambda d, h, f: nn.TransformerEncoderLayer(d, h, f).linear1.weight.shape),
    Entry("Linear", st.tuples(tensor_or_raw(MODULE_DTYPES, st.sampled_from([(2, 3), (3,), (0, 3), (2, 4), ()]))),
          lambda x: torch.nn.Linear(3, 2)(x).shape, lambda x: nn.Linear(3, 2)(x).shape),
    Entry("MultiHeadAttention", st.tuples(SEQUENCES),
          lambda x: torch.nn.MultiheadAttention(4, 2, batch_first=True)(x, x, x)[0].shape,
          lambda x: nn.MultiHeadAttention(4, 2)(x)[0].shape),
    Entry("TransformerEncoderLayer", st.tuples(SEQUENCES),
          lambda x: torch.nn.TransformerEncoderLayer(4, 2, 8, batch_first=True).eval()(x).shape,
          lambda x: nn.TransformerEncoderLayer(4, 2, 8).eval()(x).shape),
    Entry("SGD", st.tuples(hyper, hyper, hyper),
          lambda lr, m, wd: torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=lr, momentum=m,
                                            weight_decay=wd).defaults["lr"],
          lambda lr, m, wd: optim.SGD([ta.ones(1, requires_grad=True)], lr=lr, momentum=m,
                                      weight_decay=wd).defaults["lr"],
          refuses_nan=True),
    Entry("Adam", st.tuples(hyper, hyper, hyper, hyper),
          lambda lr, b, eps, wd: torch.optim.Adam([torch.ones(1, requires_grad=True)], lr=lr, betas=(b, 0.9),
                                                  eps=eps, weight_decay=wd).defaults["lr"],
          lambda lr, b, eps, wd: optim.Adam([ta.ones(1, requires_grad=True)], lr=lr, betas=(b, 0.9),
                                            eps=eps, weight_decay=wd).defaults["lr"]),
]

_NAMES_IN_ERRORS = {  # what an error must name where it is not the entry's name
    "SGD": ("Invalid",), "Adam": ("Invalid",),  # PyTorch's words, kept: "Invalid learning rate: …"
    "scaled_dot_product_attention": ("scaled_dot_product_attention", "attn_mask"),  # the argument at fault
}


def _host(value):
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if isinstance(value, ta.Tensor):
        return value.numpy()
    return value


def assert_same_result(expected, got, atol=1e-5):
    if isinstance(expected, torch.Size):
        assert tuple(got) == tuple(expected), (got, expected)
        return
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), (expected, got)
        for e, g in zip(expected, got):
            assert_same_result(e, g, atol)
        return
    expected, got = _host(expected), _host(got)
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), f"expected an array, got {type(got).__name__}"
        assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype, expected.shape,
                                                                             expected.dtype)
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, expected)
    else:
        assert got == expected or (got != got and expected != expected), (got, expected)


def _empty_and_not_floating(args):
    first = args[0].value if isinstance(args[0], Raw) else args[0]
    return isinstance(first, np.ndarray) and first.size == 0 and first.dtype.kind in "biuc"


def check_the_rule(entry, args):
    try:
        expected = entry.torch_call(*_convert(list(args), _to_torch))
    except Exception:
        expected = ERRORS
    if expected is ERRORS:
        with pytest.raises(ERRORS) as error:
            entry.ta_call(*_convert(list(args), _to_ta))
        names = _NAMES_IN_ERRORS.get(entry.name, (entry.name,))
        assert any(name in str(error.value) for name in names), str(error.value)
        return
    if _empty_and_not_floating(args):  # torch skips its dtype check on an empty tensor; tinyattn does not
        try:
            got = entry.ta_call(*_convert(list(args), _to_ta))
        except TypeError as error:
            assert entry.name in str(error) and "floating-point" in str(error)
            return
        assert_same_result(expected, got, entry.atol)
        return
    if entry.refuses_nan and any(isinstance(a, float) and math.isnan(a) for a in args):
        with pytest.raises(ValueError, match="Invalid"):
            entry.ta_call(*_convert(list(args), _to_ta))
        return
    assert_same_result(expected, entry.ta_call(*_convert(list(args), _to_ta)), entry.atol)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_an_input_gives_torchs_result_or_a_named_error(entry, data):
    check_the_rule(entry, data.draw(entry.args))


# ----------------------------------------------------------------------------- the examples, before -> after

x = ta.tensor(np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("call, error, words", [
    # out-of-range dims are refused, never wrapped around: (4, 3), (2, 2, 3), a split of dim 0, (6,)
    (lambda: ta.cat([x, x], dim=2), IndexError, r"cat: dim 2 is out of range \[-2, 1\]"),
    (lambda: ta.stack([x, x], dim=3), IndexError, r"stack: dim 3 is out of range \[-3, 2\]"),
    (lambda: x.split(1, dim=2), IndexError, "split: dim 2 is out of range"),
    (lambda: x.flatten(2), IndexError, "flatten: start_dim 2 is out of range"),
    (lambda: x.reshape(-2, 3), ValueError, r"reshape: invalid size -2 in shape \(-2, 3\)"),
    (lambda: x.split(-1), ValueError, "split: split_size must be a non-negative integer, got -1"),
    # ZeroDivisionError
    (lambda: x.chunk(0), ValueError, "chunk: chunks must be a positive integer, got 0"),
    (lambda: ta.cat([ta.tensor(1.0)]), ValueError, "cat: 0-d tensors cannot be concatenated"),
    (lambda: ta.tensor(1.0).split(3), ValueError, "split: expects a tensor of at least one dimension"),
    # IndexError: tuple index out of range
    (lambda: ta.cat([]), ValueError, "cat: expected a non-empty list of tensors"),
    (lambda: ta.tensor(1.0).transpose(0, 1), IndexError, r"transpose: dim1 1 is out of range \[-1, 0\]"),
    (lambda: ta.tensor(1.0).expand(-1, 2), ValueError, "expand: invalid size -1 at position 0"),
    (lambda: ta.tensor(2.0) @ ta.tensor(3.0), RuntimeError, "matmul: both operands need at least one dimension"),
    # refused, as torch refuses them (never promoted): float32 @ float64, mixed LayerNorm, sdpa
    (lambda: x.float() @ x.double().T, RuntimeError, "matmul: the left operand is float32 and the right operand is "
     "float64; matmul needs one dtype"),
    (lambda: nn.LayerNorm(3)(x.double()), RuntimeError, "layer_norm: input is float64 and weight is float32"),
    (lambda: F.scaled_dot_product_attention(x.float()[None], x.double()[None], x.float()[None]), RuntimeError,
     "scaled_dot_product_attention: query is float32 and key is float64"),
    (lambda: nn.Linear(3, 2)(x.double()), RuntimeError, "Linear: input is float64 and weight is float32"),
    (lambda: F.linear(x.float(), x.double()), RuntimeError, "linear: input is float32 and weight is float64"),
    (lambda: F.linear(x.float(), x.float(), x.double()[0]), RuntimeError,
     "linear: input is float32 and bias is float64"),
    # NumPy's own words
    (lambda: x.sum((0, 0)), ValueError, r"sum: dim \(0, 0\) names the same dimension twice"),
    (lambda: nn.Linear(-1, 2), ValueError, "Linear: in_features must be a non-negative integer, got -1"),
    (lambda: nn.TransformerEncoderLayer(4, 2, dim_feedforward=-1), ValueError,
     "TransformerEncoderLayer: dim_feedforward must be a non-negative integer, got -1"),
    (lambda: F.linear(x, ta.ones(2, 3, dtype=ta.float64), ta.ones(5, dtype=ta.float64)), ValueError,
     r"linear: bias of shape \(5,\) cannot be broadcast to the output's shape \(2, 2\)"),
    (lambda: -ta.tensor([True]), TypeError, "neg: the - operator on a boolean tensor"),
    (lambda: ta.tensor([True]) - ta.tensor([False]), TypeError, "sub: subtracting two boolean tensors"),
    (lambda: ta.tensor([True]).abs(), TypeError, "abs: boolean input"),
    (lambda: F.softmax(ta.tensor([1, 2]), 0), TypeError, "softmax: input must be a floating-point tensor"),
    (lambda: F.layer_norm(ta.tensor([[1, 2]]), (2,)), TypeError, "layer_norm: input must be a floating-point"),
    (lambda: F.cross_entropy(ta.tensor([[1, 2]]), ta.tensor([0])), TypeError, "cross_entropy: input must be"),
    # non-tensor inputs
    (lambda: F.softmax([1.0, 2.0], 0), TypeError, "softmax: input must be a Tensor, got list"),
    (lambda: nn.Linear(3, 2)(np.ones((4, 3))), TypeError, "Linear: input must be a Tensor, got ndarray"),
    (lambda: F.embedding(ta.tensor([0]), np.ones((3, 2))), TypeError, "embedding: weight must be a Tensor"),
    # embedding: a 1-D table and an out-of-range padding_idx are refused
    (lambda: F.embedding(ta.tensor([0, 1]), ta.ones(3)), ValueError, r"embedding: weight must be 2-D"),
    (lambda: F.embedding(ta.tensor([0, 1]), ta.ones(3, 2), padding_idx=7), ValueError,
     "embedding: padding_idx 7 must be within the 3 rows"),
    # NaN hyperparameters are refused
    (lambda: optim.Adam([ta.ones(1, requires_grad=True)], lr=NAN), ValueError, "Invalid learning rate: nan"),
    (lambda: optim.Adam([ta.ones(1, requires_grad=True)], eps=NAN), ValueError, "Invalid epsilon value: nan"),
    (lambda: optim.AdamW([ta.ones(1, requires_grad=True)], weight_decay=NAN), ValueError,
     "Invalid weight_decay value: nan"),
    (lambda: optim.SGD([ta.ones(1, requires_grad=True)], lr=NAN), ValueError, "Invalid learning rate: nan"),
    (lambda: optim.Adam([ta.ones(1, requires_grad=True)], lr="fast"), TypeError, "Invalid learning rate: 'fast'"),
    (lambda: nn.utils.clip_grad_norm_([ta.ones(1, requires_grad=True)], NAN), ValueError,
     "clip_grad_norm_: max_norm is NaN"),
    # creation, conversion and interop: NumPy's or Python's words before
    (lambda: ta.zeros(-1, 2), ValueError, "zeros: size must be a non-negative integer, got -1"),
    (lambda: ta.zeros(2.0), TypeError, "zeros: size must be an integer, got float"),
    (lambda: ta.arange(0, 5, 0), ValueError, "arange: step 0 must be non-zero"),
    (lambda: ta.tensor([[1, 2], [3]]), ValueError, "tensor: data must be a number or a rectangular nested list"),
    (lambda: ta.ones(2).size(5), IndexError, r"size\(\): dim 5 is out of range"),
    (lambda: ta.interop.from_torch([1]), TypeError, "from_torch: expected a state dict"),
])
def test_each_reported_example_now_raises_a_named_error(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_empty_and_0d_inputs_give_pytorchs_results():
    assert [p.shape for p in ta.zeros(0).split(3)] == [(0,)]  # one empty piece, as torch gives
    assert [p.shape for p in ta.zeros(0).chunk(2)] == [(0,), (0,)]
    assert F.softmax(ta.zeros(0, 3), dim=0).shape == (0, 3)
    output, _ = F.scaled_dot_product_attention(ta.zeros(1, 2, 0), ta.zeros(1, 2, 0), ta.zeros(1, 2, 3))
    np.testing.assert_array_equal(output.numpy(), np.zeros((1, 2, 3), np.float32))
    assert F.dropout(ta.tensor(1.0), 0.5).shape == ()
    assert x.sum(()).shape == ()  # PyTorch: an empty dim tuple reduces everything
    no_targets = ta.tensor(np.zeros(0, np.int64))  # a batch of no examples
    assert np.isnan(F.cross_entropy(ta.zeros(0, 3), no_targets).item())  # PyTorch: the mean of nothing is NaN
    assert F.cross_entropy(ta.zeros(0, 3), no_targets, reduction="sum").item() == 0.0
    assert F.cross_entropy(ta.zeros(0, 3), no_targets, reduction="none").shape == (0,)


def test_linear_bias_that_broadcasts_gets_a_gradient_of_its_own_shape():
    weight, bias = ta.ones(2, 3, requires_grad=True), ta.ones(1, 2, requires_grad=True)
    F.linear(ta.ones(4, 3), weight, bias).sum().backward()
    assert bias.grad.shape == (1, 2)  # the bias's own shape
    np.testing.assert_array_equal(bias.grad, [[4.0, 4.0]])


def test_matmul_backward_with_an_empty_inner_dimension():
    a, b = ta.zeros(2, 3, 0, requires_grad=True), ta.zeros(0, 4, requires_grad=True)
    (a @ b).sum().backward()
    assert a.grad.shape == (2, 3, 0) and b.grad.shape == (0, 4)


def test_sgd_refuses_a_gradient_of_another_shape():
    p = ta.ones(2, 3, requires_grad=True)
    p.grad = np.ones((1, 3), np.float32)  # refused: never broadcast over the parameter
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\) has a .grad of shape \(1, 3\)"):
        optim.SGD([p], lr=0.1).step()
    np.testing.assert_array_equal(p.data, np.ones((2, 3)))


def test_load_state_dict_names_a_ragged_value_beside_the_other_problems():
    model = nn.Linear(2, 2)
    before = model.weight.numpy()
    with pytest.raises(RuntimeError) as error:
        model.load_state_dict({"weight": [[1.0, 2.0], [3.0]], "bias": np.zeros(3)})
    message = str(error.value)
    assert "weight" in message and "not a rectangular numeric array" in message and "size mismatch for bias" in message
    np.testing.assert_array_equal(model.weight.numpy(), before)


def test_a_pytorch_layout_state_dict_points_at_from_torch():
    theirs = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    with pytest.raises(RuntimeError, match=r"ta.interop.from_torch"):
        nn.MultiHeadAttention(4, 2).load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})


def test_a_pytorch_style_function_points_at_the_native_style():
    class Square(ta.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(TypeError, match=r"PyTorch's style.*ta.autograd.Function"):
        Square.apply(ta.ones(2))
    with pytest.raises(TypeError, match=r"Exp.apply: expects one or more Tensors as inputs, got list"):
        ta.ops.Exp.apply([1.0])
