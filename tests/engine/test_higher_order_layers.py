"""Second derivatives through the functionals and the attention layers, against PyTorch's, on the definitions
and compiled (``ta.compile``: the fused nodes, which recompute through their reference definition under
``create_graph``), the ``route`` fixture.

As in ``test_higher_order``: ``g = grad(f, x, v, create_graph=True)``, ``h = grad(Σ g·u, x)`` on both
sides, ``v`` and ``u`` random. For the layers the differentiated inputs are the sequences *and* every
parameter (weights copied from torch through ``interop.from_torch``; torch's directions for the
parameters mapped to ours the same way, our derivatives mapped back through ``to_torch``). Dropout with
``p > 0`` draws other masks than torch's, so it is checked against finite differences (``gradgradcheck``,
the generator re-seeded on every call, so that every evaluation drops the same positions).
"""

import functools

import numpy as np
import pytest
import torch
from cases import SMALL, attention_case
from hypothesis import given
from hypothesis import strategies as st
from registry import as_written, functionals, ours_attention, torch_attention
from test_higher_order import assert_orders_match
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch_parity import load_from_torch

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import testing as tt
from tinyattn.interop import from_torch, to_torch

TF = torch.nn.functional
RTOL, ATOL = 1e-7, 1e-9


@pytest.fixture(autouse=True)
def torch_math_attention():
    """torch's attention on its composite (math) kernel: the fused CPU kernel has no double backward."""
    with sdpa_kernel(SDPBackend.MATH):
        yield


# ----------------------------------------------------------------------------- functionals


FUNCTIONALS = functionals()  # the registry's ``functional`` table, on the definitions


@pytest.mark.parametrize("name", [s.name for s in FUNCTIONALS])
@given(data=st.data())
def test_functionals_second_order_match_torch(name, route, data):
    spec = {s.name: s for s in functionals(route)}[name]
    arrays, options = data.draw(spec.case, label="case")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    assert_orders_match(spec.ours, spec.theirs, arrays, options, seed, rtol=RTOL, atol=ATOL)


@given(shape=tt.shapes(min_dims=1, **SMALL), p=st.sampled_from([0.2, 0.5]), seed=st.integers(0, 2**31 - 1),
       data=st.data())
def test_dropout_second_order_against_finite_differences(shape, p, seed, data):
    x = ta.tensor(data.draw(tt.arrays(shape), label="x"), requires_grad=True)

    def fn(x):
        ta.manual_seed(seed)  # the same mask on every evaluation
        return F.dropout(x.tanh() * x, p) * x

    assert tt.gradgradcheck(fn, [x])
    ta.manual_seed(seed)
    mask = F.dropout(ta.ones(*shape, dtype=ta.float64), p).numpy()
    assert set(np.unique(mask)) <= {0.0, 1 / (1 - p)}
    v = np.random.default_rng(seed).standard_normal(shape)
    (g,) = ta.autograd.grad(fn(x), x, ta.tensor(v), create_graph=True)
    a = x.numpy()  # d/dx [m·tanh(x)·x²] = m·(x²·sech²x + 2x·tanh x)
    np.testing.assert_allclose(g.numpy(), v * mask * (a * a / np.cosh(a) ** 2 + 2 * a * np.tanh(a)), rtol=1e-10,
                               atol=1e-12)


# ----------------------------------------------------------------------------- scaled dot-product attention


@given(data=st.data())
def test_attention_second_order_matches_torch(route, data):
    arrays, options = data.draw(attention_case(), label="case")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    ours = functools.partial(ours_attention, sdpa=route(F.scaled_dot_product_attention))
    assert_orders_match(ours, torch_attention, arrays, options, seed, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "output"])
def test_attention_gradgradcheck_with_a_fully_masked_row(route, need_weights):
    rng = np.random.default_rng(3)
    q, k, v = (ta.tensor(rng.standard_normal(s), requires_grad=True) for s in [(2, 3, 2), (2, 4, 2), (2, 4, 3)])
    mask = ta.tensor(np.array([[True, False, True, True], [False] * 4, [True, True, False, True]]))
    sdpa = route(F.scaled_dot_product_attention)
    fn = lambda q, k, v: sdpa(q, k, v, attn_mask=mask, is_causal=True, need_weights=need_weights)[0]  # noqa: E731
    assert tt.gradgradcheck(fn, [q, k, v])
    (gq, gk, gv) = ta.autograd.grad(fn(q, k, v), [q, k, v], ta.tensor(rng.standard_normal((2, 3, 3))),
                                    create_graph=True)
    np.testing.assert_array_equal(gq.numpy()[:, 1], 0.0)  # the row with no key has no gradient…
    (h,) = ta.autograd.grad((gq * ta.tensor(rng.standard_normal(gq.shape))).sum(), q)
    np.testing.assert_array_equal(h.numpy()[:, 1], 0.0)  # …and no second one
    assert np.isfinite(h.numpy()).all()


# ----------------------------------------------------------------------------- layers, parameters included


def assert_module_orders_match(ours, theirs, arrays, call_ours, call_theirs, seed):
    """First and second derivatives of ``call(module, *inputs)`` with respect to the inputs and every
    parameter, ours against torch's (parameters compared in torch's layout)."""
    rng = np.random.default_rng(seed)
    their_params = dict(theirs.named_parameters())
    our_params = dict(ours.named_parameters())
    with ta.no_grad():
        out_shape = call_ours(ours, *[ta.tensor(a) for a in arrays]).shape
    v = rng.standard_normal(out_shape)
    u_inputs = [rng.standard_normal(a.shape) for a in arrays]
    u_theirs = {name: rng.standard_normal(tuple(p.shape)) for name, p in their_params.items()}
    u_ours = from_torch(u_theirs)
    assert sorted(u_ours) == sorted(our_params)

    def run(grad, tensor, xs, params, u_params, out):
        leaves = xs + list(params.values())
        directions = u_inputs + [u_params[name] for name in params]
        g = grad(out, leaves, tensor(v), create_graph=True, materialize_grads=True)
        s = sum((gi * tensor(d)).sum() for gi, d in zip(g, directions))
        h = grad(s, leaves, materialize_grads=True)
        return g, h

    xs = [ta.tensor(a, requires_grad=True) for a in arrays]
    out = call_ours(ours, *xs)
    ours_g, ours_h = run(ta.autograd.grad, ta.tensor, xs, our_params, u_ours, out)
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    t_out = call_theirs(theirs, *txs)
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-9, atol=1e-10)
    their_g, their_h = run(torch.autograd.grad, torch.tensor, txs, their_params, u_theirs, t_out)
    n = len(arrays)
    for order, mine, other in (("first", ours_g, their_g), ("second", ours_h, their_h)):
        for i in range(n):
            np.testing.assert_allclose(mine[i].numpy(), other[i].detach().numpy(), rtol=RTOL, atol=ATOL,
                                       err_msg=f"{order} derivative, input {i}")
        mapped = to_torch({name: g.numpy() for name, g in zip(our_params, mine[n:])})
        for name, g in zip(their_params, other[n:]):
            np.testing.assert_allclose(mapped[name], g.detach().numpy(force=True), rtol=RTOL, atol=ATOL,
                                       err_msg=f"{order} derivative, parameter {name}")


@st.composite
def attention_layer_case(draw):
    heads = draw(st.integers(1, 2))
    return dict(heads=heads, d_model=heads * draw(st.integers(1, 2)), ff=draw(st.integers(1, 4)),
                B=draw(st.integers(1, 2)), T=draw(st.integers(1, 3)), S=draw(st.integers(1, 3)),
                causal=draw(st.booleans()), masked=draw(st.booleans()), norm_first=draw(st.booleans()),
                activation=draw(st.sampled_from(["relu", "gelu"])), seed=draw(st.integers(0, 2**31 - 1)))


def _masks(case, lq, lk):
    """(our boolean mask or None, True = may attend) and the torch mask that means the same (True = masked);
    no query loses every key (torch's modules give NaN there)."""
    rng = np.random.default_rng(case["seed"])
    allowed = rng.random((lq, lk)) < 0.7 if case["masked"] else np.ones((lq, lk), dtype=bool)
    allowed[:, 0] = True
    if case["causal"]:
        allowed &= np.tril(np.ones((lq, lk), dtype=bool))
    ours = ta.tensor(allowed) if case["masked"] else None
    return ours, (torch.tensor(~allowed) if case["masked"] or case["causal"] else None)


def multi_head_attention_pair(case, cross, route=as_written):
    """Our multi-head attention (passed through ``route``) and torch's with the same weights, the input arrays (a
    second sequence for cross-attention) and a call of each without the weights (masks in each library's
    convention)."""
    torch.manual_seed(case["seed"])
    rng = np.random.default_rng(case["seed"])
    theirs = torch.nn.MultiheadAttention(case["d_model"], case["heads"], batch_first=True).double()
    ours = route(load_from_torch(nn.MultiHeadAttention(case["d_model"], case["heads"]), theirs, "cpu"))
    lk = case["S"] if cross else case["T"]
    arrays = [rng.standard_normal((case["B"], case["T"], case["d_model"]))]
    if cross:
        arrays.append(rng.standard_normal((case["B"], lk, case["d_model"])))
    our_mask, their_mask = _masks(case, case["T"], lk)

    def call_ours(m, x, memory=None):
        return m(x, memory, attn_mask=our_mask, is_causal=case["causal"], need_weights=False)[0]

    def call_theirs(m, x, memory=None):
        memory = x if memory is None else memory
        return m(x, memory, memory, attn_mask=their_mask, need_weights=False)[0]

    return ours, theirs, arrays, call_ours, call_theirs


@given(case=attention_layer_case(), cross=st.booleans())
def test_multi_head_attention_second_order_matches_torch(route, case, cross):
    assert_module_orders_match(*multi_head_attention_pair(case, cross, route), case["seed"])


@pytest.mark.parametrize("side", ["encoder", "decoder"])
@given(case=attention_layer_case())
def test_transformer_layers_second_order_match_torch(side, route, case):
    torch.manual_seed(case["seed"])
    rng = np.random.default_rng(case["seed"])
    common = dict(dim_feedforward=case["ff"], dropout=0.0, activation=case["activation"],
                  norm_first=case["norm_first"])
    if side == "encoder":
        theirs = torch.nn.TransformerEncoderLayer(case["d_model"], case["heads"], batch_first=True, **common)
        ours = nn.TransformerEncoderLayer(case["d_model"], case["heads"], **common)
    else:
        theirs = torch.nn.TransformerDecoderLayer(case["d_model"], case["heads"], batch_first=True, **common)
        ours = nn.TransformerDecoderLayer(case["d_model"], case["heads"], **common)
    theirs.double()
    ours = route(load_from_torch(ours, theirs, "cpu"))
    arrays = [rng.standard_normal((case["B"], case["T"], case["d_model"]))]
    our_mask, their_mask = _masks(case, case["T"], case["T"])
    if side == "encoder":
        call_ours = lambda m, x: m(x, src_mask=our_mask, is_causal=case["causal"])  # noqa: E731
        call_theirs = lambda m, x: m(x, src_mask=their_mask)  # noqa: E731
    else:
        arrays.append(rng.standard_normal((case["B"], case["S"], case["d_model"])))
        lengths = rng.integers(1, case["S"] + 1, size=case["B"])
        padding = F.padding_mask(lengths, case["S"])  # (B, 1, 1, S): True = a real token
        their_padding = torch.tensor(np.arange(case["S"])[None, :] >= lengths[:, None])  # True = padding

        def call_ours(m, x, memory):
            return m(x, memory, tgt_mask=our_mask, memory_mask=padding, tgt_is_causal=case["causal"])

        def call_theirs(m, x, memory):
            return m(x, memory, tgt_mask=their_mask, memory_key_padding_mask=their_padding)

    assert_module_orders_match(ours, theirs, arrays, call_ours, call_theirs, case["seed"])
