"""Forward-mode AD (``ta.autograd.forward_ad``), proven by factories over the registry's ``jvp`` table (and its
``functional`` table against PyTorch).

For a case ``f(x)`` (float64 inputs ``x``), a random tangent ``v`` (one per input) and a random cotangent
``u`` (one per output), ``J v`` comes from one forward pass with dual inputs, and must agree with

1. central finite differences: ``(f(x + εv) - f(x - εv)) / 2ε``;
2. the operations' VJP rules: ``⟨u, J v⟩ = ⟨Jᵀ u, v⟩``, ``Jᵀ u`` from ``ta.autograd.grad``, so every JVP rule
   is the transpose of its VJP rule;
3. PyTorch's forward AD (``torch.autograd.forward_ad``), for the functionals, attention and the layers.

Then what only levels can show: forward over forward (a second derivative), the perturbation confusion
(an inner level's derivative never picks up an outer level's tangent), forward over reverse and reverse
over forward; and the errors.
"""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as torch_fwAD
from cases import attention_case
from hypothesis import given
from hypothesis import strategies as st
from registry import Spec, convert, ours_attention, table, torch_attention
from test_higher_order_layers import FUNCTIONALS, _masks, attention_layer_case, multi_head_attention_pair
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch_parity import load_from_torch

import tinyattn as ta
import tinyattn.autograd.forward_ad as fwAD
import tinyattn.compat as compat
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import testing as tt

# ----------------------------------------------------------------------------- the table


TABLE = table("jvp")
FD_TABLE = [s for s in TABLE if s.gradcheck]


def _tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _options(options, make):
    return {k: convert(v, make) for k, v in options.items()}


def forward_mode(fn, arrays, tangents, options):
    """``(outputs, J v)`` of ``fn`` at ``arrays`` along ``tangents``, as NumPy arrays, by our forward mode (an
    output without a tangent: zeros)."""
    with fwAD.dual_level():
        duals = [fwAD.make_dual(ta.tensor(a), ta.tensor(v)) for a, v in zip(arrays, tangents)]
        outs = _tuple(fn(*duals, **_options(options, ta.tensor)))
        unpacked = [fwAD.unpack_dual(o) for o in outs]
    return ([p.numpy() for p, _ in unpacked],
            [np.zeros(p.shape) if t is None else t.numpy() for p, t in unpacked])


def torch_forward_mode(fn, arrays, tangents, options):
    with torch_fwAD.dual_level(), sdpa_kernel(SDPBackend.MATH):
        duals = [torch_fwAD.make_dual(torch.tensor(a), torch.tensor(v)) for a, v in zip(arrays, tangents)]
        outs = _tuple(fn(*duals, **_options(options, torch.from_numpy)))
        unpacked = [torch_fwAD.unpack_dual(o) for o in outs]
    return ([p.detach().numpy() for p, _ in unpacked],
            [np.zeros(tuple(p.shape)) if t is None else t.detach().numpy() for p, t in unpacked])


def _draw(spec, data):
    arrays, options = data.draw(spec.case, label="case")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    return arrays, options, [rng.standard_normal(a.shape) for a in arrays], rng


# ----------------------------------------------------------------------------- 1. finite differences


@pytest.mark.parametrize("spec", FD_TABLE, ids=[s.name for s in FD_TABLE])
@given(data=st.data())
def test_jvp_matches_finite_differences(spec, data):
    arrays, options, tangents, _ = _draw(spec, data)
    _, jv = forward_mode(spec.ours, arrays, tangents, options)
    eps = 1e-6
    with ta.no_grad():
        ahead, behind = ([o.numpy() for o in _tuple(spec.ours(*[ta.tensor(a + sign * eps * v)
                                                                 for a, v in zip(arrays, tangents)],
                                                               **_options(options, ta.tensor)))]
                         for sign in (1, -1))
    for i, (mine, plus, minus) in enumerate(zip(jv, ahead, behind)):
        np.testing.assert_allclose(mine, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{spec.name}: the tangent of output {i}")


# ----------------------------------------------------------------------------- 2. the transpose of the VJP


@pytest.mark.parametrize("spec", TABLE, ids=[s.name for s in TABLE])
@given(data=st.data())
def test_jvp_is_the_transpose_of_the_vjp(spec, data):
    """``⟨u, J v⟩`` by forward mode equals ``⟨Jᵀ u, v⟩`` by reverse mode, for random ``u`` and ``v``."""
    arrays, options, tangents, rng = _draw(spec, data)
    primals, jv = forward_mode(spec.ours, arrays, tangents, options)
    cotangents = [rng.standard_normal(p.shape) for p in primals]
    xs = [ta.tensor(a, requires_grad=True) for a in arrays]
    outs = _tuple(spec.ours(*xs, **_options(options, ta.tensor)))
    for out, primal in zip(outs, primals):
        np.testing.assert_allclose(out.numpy(), primal, rtol=1e-12, atol=1e-12)  # a dual's primal: the plain value
    live = [(o, ta.tensor(u)) for o, u in zip(outs, cotangents) if o.requires_grad]
    vjp = ta.autograd.grad([o for o, _ in live], xs, [u for _, u in live], allow_unused=True, materialize_grads=True)
    forward = sum(float((u * t).sum()) for u, t in zip(cotangents, jv))
    reverse = sum(float((np.asarray(g.data) * v).sum()) for g, v in zip(vjp, tangents))  # (asarray: autograd.grad
    # may give a 0-d gradient as a NumPy scalar)
    assert forward == pytest.approx(reverse, rel=1e-9, abs=1e-9)


# ----------------------------------------------------------------------------- 3. PyTorch's forward AD


@pytest.mark.parametrize("spec", FUNCTIONALS, ids=[s.name for s in FUNCTIONALS])
@given(data=st.data())
def test_functionals_match_torch_forward_ad(spec, data):
    arrays, options, tangents, _ = _draw(spec, data)
    ours, theirs = forward_mode(spec.ours, arrays, tangents, options), \
        torch_forward_mode(spec.theirs, arrays, tangents, options)
    for what, mine, other in zip(("primal", "tangent"), ours, theirs):
        for i, (a, b) in enumerate(zip(mine, other)):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10, err_msg=f"{what} {i}")


@given(data=st.data())
def test_attention_matches_torch_forward_ad(data):
    arrays, options, tangents, _ = _draw(Spec("attention", attention_case(), None, None), data)
    ours = forward_mode(ours_attention, arrays, tangents, options)
    theirs = torch_forward_mode(torch_attention, arrays, tangents, options)
    for what, mine, other in zip(("primal", "tangent"), ours, theirs):
        for i, (a, b) in enumerate(zip(mine, other)):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10, err_msg=f"{what} {i}")


def _assert_module_tangents_match(ours, theirs, arrays, call_ours, call_theirs, seed):
    """The tangent of ``call(module, *inputs)`` along random input tangents, ours against torch's (weights
    copied, dropout 0)."""
    tangents = [np.random.default_rng(seed).standard_normal(a.shape) for a in arrays]
    mine = forward_mode(lambda *xs: call_ours(ours, *xs), arrays, tangents, {})
    other = torch_forward_mode(lambda *xs: call_theirs(theirs, *xs), arrays, tangents, {})
    for what, a, b in zip(("primal", "tangent"), mine, other):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-9, atol=1e-10, err_msg=what)


@given(case=attention_layer_case(), cross=st.booleans())
def test_multi_head_attention_matches_torch_forward_ad(case, cross):
    _assert_module_tangents_match(*multi_head_attention_pair(case, cross), case["seed"])


@pytest.mark.parametrize("side", ["encoder", "decoder"])
@given(case=attention_layer_case())
def test_transformer_layers_match_torch_forward_ad(side, case):
    torch.manual_seed(case["seed"])
    rng = np.random.default_rng(case["seed"])
    common = dict(dim_feedforward=case["ff"], dropout=0.0, activation=case["activation"],
                  norm_first=case["norm_first"])
    layer = "TransformerEncoderLayer" if side == "encoder" else "TransformerDecoderLayer"
    theirs = getattr(torch.nn, layer)(case["d_model"], case["heads"], batch_first=True, **common).double()
    ours = load_from_torch(getattr(nn, layer)(case["d_model"], case["heads"], **common), theirs, "cpu")
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

    _assert_module_tangents_match(ours, theirs, arrays, call_ours, call_theirs, case["seed"])


# ----------------------------------------------------------------------------- 4. levels


def _f64(*values):
    return ta.tensor(np.array(values, dtype=np.float64))


@given(x=tt.arrays((4,)))
def test_forward_over_forward_gives_the_second_derivative(x):
    """``tanh(x + ε₁ + ε₂)``: the inner tangent is ``tanh'(x + ε₁)``, whose outer tangent is ``tanh''(x)``; forward
    AD has one level (as PyTorch's), so the outer one is ``ta.func.jvp``'s."""
    ones = ta.tensor(np.ones(4))

    def first_derivative(point):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fwAD.make_dual(point, ones).tanh()).tangent

    first, second = ta.func.jvp(first_derivative, (ta.tensor(x),), (ones,))
    t = np.tanh(x)
    np.testing.assert_allclose(first.numpy(), 1 - t * t, rtol=1e-12)
    np.testing.assert_allclose(second.numpy(), -2 * t * (1 - t * t), rtol=1e-12)


def test_nested_levels_never_confuse_their_perturbations():
    """``d/dx [x · d/dy (x + y)]`` at ``y = 1`` is 1: the inner derivative is 1 whatever ``x`` is. A tangent
    that mixed the levels would see ``d(x + y) = dx + dy = 2`` and give 2."""
    def outer(x):
        inner_derivative = ta.func.jvp(lambda y: x + y, (_f64(1.0),), (_f64(1.0),))[1]
        return x * inner_derivative

    with fwAD.dual_level():
        x = fwAD.make_dual(_f64(2.0), _f64(1.0))
        inner_derivative = ta.func.jvp(lambda y: x + y, (_f64(1.0),), (_f64(1.0),))[1]
        assert fwAD.unpack_dual(inner_derivative).tangent is None  # a constant to the outer level
        result = fwAD.unpack_dual(x * inner_derivative).tangent
    assert inner_derivative.item() == 1.0 and result.item() == 1.0
    assert ta.func.jvp(outer, (_f64(2.0),), (_f64(1.0),))[1].item() == 1.0


def test_one_level_at_a_time_numbered_zero_as_pytorchs():
    """PyTorch's ``test_autograd.py::TestAutogradForwardMode::test_nested_level``: the level is 0, and a second one
    inside it is refused."""
    with fwAD.dual_level() as level:
        assert level == 0
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported at the moment"):
            fwAD.enter_dual_level()
    with fwAD.dual_level() as again:  # closed and opened again: still 0
        assert again == 0


def _hessian_vector(fn, x, v):
    """``H v`` of ``Σ fn(x)`` by finite differences of its gradient."""
    eps = 1e-6

    def gradient(a):
        t = ta.tensor(a, requires_grad=True)
        return ta.autograd.grad(fn(t).sum(), t)[0].numpy()

    return (gradient(x + eps * v) - gradient(x - eps * v)) / (2 * eps)


FORWARD_OVER_REVERSE = [
    pytest.param(lambda x: x.sin() * x + (x @ x.T).sum(-1, keepdim=True), id="input_saving"),
    pytest.param(lambda x: x[np.array([0, 0, 1])].sin() * x[:, ::-1][np.array([1, 1, 0])], id="indexing"),
    pytest.param(lambda x: F.layer_norm(x * x, (3,)) * x, id="layer_norm"),  # through its reference: sqrt
    pytest.param(lambda x: x.tanh() * x.exp(), id="output_saving"),  # backward reads the output, with its tangent
    pytest.param(lambda x: F.softmax(x, -1) * x, id="softmax"),
]


@pytest.mark.parametrize("fn", FORWARD_OVER_REVERSE)
def test_forward_over_reverse_gives_a_hessian_vector_product(fn):
    """Inside a level, ``ta.autograd.grad(create_graph=True)`` runs backward formulas as operations on tensors,
    so the gradient carries a tangent: ``H v``."""
    rng = np.random.default_rng(0)
    x, v = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    leaf = ta.tensor(x, requires_grad=True)
    with fwAD.dual_level():
        dual = fwAD.make_dual(leaf, ta.tensor(v))
        (g,) = ta.autograd.grad(fn(dual).sum(), leaf, create_graph=True)
        hv = fwAD.unpack_dual(g).tangent
    assert hv is not None
    np.testing.assert_allclose(hv.numpy(), _hessian_vector(fn, x, v), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn", [p.values[0] for p in FORWARD_OVER_REVERSE], ids=[p.id for p in FORWARD_OVER_REVERSE])
def test_reverse_over_forward_gives_a_hessian_vector_product(fn):
    """A tangent computed with the graph recorded is differentiable: ``∇ₓ ⟨1, J v⟩ = H v`` (for ``Σ fn``)."""
    rng = np.random.default_rng(1)
    x, v = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    leaf = ta.tensor(x, requires_grad=True)
    with fwAD.dual_level():
        jv = fwAD.unpack_dual(fn(fwAD.make_dual(leaf, ta.tensor(v)))).tangent
    (hv,) = ta.autograd.grad(jv.sum(), leaf)
    np.testing.assert_allclose(hv.numpy(), _hessian_vector(fn, x, v), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- the API and its errors


def test_the_module_is_reached_as_an_attribute_and_by_import():
    assert ta.autograd.forward_ad is fwAD
    assert fwAD.UnpackedDualTensor._fields == ("primal", "tangent")


def test_levels_open_and_close_in_order():
    level = fwAD.enter_dual_level()
    x = fwAD.make_dual(_f64(1.0, 2.0), _f64(3.0, 4.0))
    primal, tangent = fwAD.unpack_dual(x)
    assert primal._tangents is None and tangent.tolist() == [3.0, 4.0]
    with pytest.raises(RuntimeError, match="level 1 is not open"):
        fwAD.exit_dual_level(level=level + 1)
    fwAD.exit_dual_level(level=level)
    assert fwAD.unpack_dual(x).tangent is None  # the level is closed: its tangents are gone
    with fwAD.dual_level():
        assert fwAD.unpack_dual(x).tangent is None  # a level opened again does not see a closed one's tangents
    with pytest.raises(RuntimeError, match="no forward AD level is open"):
        fwAD.exit_dual_level()


def test_a_compiled_layer_runs_its_reference_inside_a_level():
    """The fused nodes have no JVP rules: inside a level a compiled layer runs its reference forward, and gives
    the reference's primal and tangent; outside, its fused nodes again."""
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double()
    fast = ta.compile(layer)
    rng = np.random.default_rng(0)
    x, v = ta.tensor(rng.standard_normal((2, 3, 8))), ta.tensor(rng.standard_normal((2, 3, 8)))
    results = []
    for model in (layer, fast):
        with fwAD.dual_level():
            results.append([a.numpy() for a in fwAD.unpack_dual(model(fwAD.make_dual(x, v)))])
    for what, mine, reference in zip(("primal", "tangent"), *results):
        np.testing.assert_allclose(mine, reference, rtol=1e-12, atol=1e-12, err_msg=what)
    assert type(fast(x.requires_grad_()).grad_fn).__name__ == "FeedForwardBlock"  # the level is closed


def test_a_dual_is_a_differentiable_alias_and_its_primal_has_no_tangent():
    leaf = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with fwAD.dual_level():
        dual = fwAD.make_dual(leaf, _f64(1.0, 1.0))
        primal, _ = fwAD.unpack_dual(dual)
        (dual * primal).sum().backward()
        assert fwAD.unpack_dual(primal).tangent is None
        assert fwAD.unpack_dual(leaf).tangent is None  # the tensor itself is untouched
    np.testing.assert_array_equal(leaf.grad, [2.0, 4.0])


def test_make_dual_errors_teach():
    x = _f64(1.0, 2.0)
    with pytest.raises(RuntimeError, match="make_dual: no forward AD level is open"):
        fwAD.make_dual(x, _f64(1.0, 1.0))
    with fwAD.dual_level():
        with pytest.raises(ValueError, match=r"tangent's shape \(3,\) differs from the tensor's shape \(2,\)"):
            fwAD.make_dual(x, _f64(1.0, 1.0, 1.0))
        with pytest.raises(ValueError, match="tangent's dtype float32 differs from the tensor's dtype float64"):
            fwAD.make_dual(x, ta.tensor([1.0, 1.0]))
        with pytest.raises(TypeError, match="floating-point"):
            fwAD.make_dual(ta.tensor([1, 2]), ta.tensor([1, 2]))
        with pytest.raises(TypeError, match="tangent must be a Tensor"):
            fwAD.make_dual(x, np.ones(2))
        with pytest.raises(RuntimeError, match="already has a tangent at level"):
            fwAD.make_dual(fwAD.make_dual(x, _f64(1.0, 1.0)), _f64(1.0, 1.0))


def test_an_operation_without_a_rule_names_itself():
    class Square(ta.Function):
        def forward(self, x):
            self.x = x
            return x * x

        def backward(self, grad):
            return (2 * grad * self.x,)

    with fwAD.dual_level():
        x = fwAD.make_dual(_f64(1.0), _f64(1.0))
        with pytest.raises(RuntimeError, match="Square has no forward-mode rule"):
            Square.apply(x)


def test_custom_functions_take_their_jvp_and_refuse_without_one():
    class Cube(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_forward(x)
            return x * x * x * scale

        @staticmethod
        def backward(ctx, grad):
            raise AssertionError("not called")

        @staticmethod
        def jvp(ctx, dx, dscale):
            (x,) = ctx.saved_tensors
            assert dscale is None  # a number: no tangent
            return 3 * x * x * dx * 2.0

    class Pair(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x.sin(), x * 2

        @staticmethod
        def backward(ctx, a, b):
            raise AssertionError("not called")

        @staticmethod
        def jvp(ctx, dx):
            (x,) = ctx.saved_tensors
            return x.cos() * dx, dx * 2

    class NoRule(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad

    with fwAD.dual_level():
        x = fwAD.make_dual(_f64(1.0, 2.0), _f64(1.0, -1.0))
        assert fwAD.unpack_dual(Cube.apply(x, 2.0)).tangent.tolist() == [6.0, -24.0]
        sin, double = Pair.apply(x)
        np.testing.assert_allclose(fwAD.unpack_dual(sin).tangent.numpy(), np.cos([1.0, 2.0]) * [1.0, -1.0])
        assert fwAD.unpack_dual(double).tangent.tolist() == [2.0, -2.0]
        leaf = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)  # with the graph recorded, too
        assert fwAD.unpack_dual(Pair.apply(fwAD.make_dual(leaf, _f64(1.0, 1.0)))[1]).tangent.tolist() == [2.0, 2.0]
        with pytest.raises(RuntimeError, match="NoRule has no forward-mode rule.*jvp"):
            NoRule.apply(x)


def test_tangents_pass_a_module_with_full_backward_hooks():
    layer = nn.Linear(3, 2).double()
    seen = []
    layer.register_full_backward_hook(lambda module, grad_input, grad_output: seen.append(1))
    x = ta.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    v = ta.tensor(np.ones((4, 3)))
    with fwAD.dual_level():
        out = layer(fwAD.make_dual(x, v))
        tangent = fwAD.unpack_dual(out).tangent
        out.sum().backward()
    np.testing.assert_allclose(tangent.numpy(), v.numpy() @ layer.weight.numpy().T)
    assert seen == [1]


def test_in_place_writes_carry_tangents_to_views_and_bases():
    with fwAD.dual_level():
        a = fwAD.make_dual(_f64(1.0, 2.0, 3.0), _f64(1.0, 1.0, 1.0))
        b = fwAD.make_dual(_f64(5.0), _f64(10.0))
        x = a * 2
        view = x[1:]
        view[0] = b[0]  # x = [2, 5, 6]: tangent [2, 10, 2]
        assert fwAD.unpack_dual(x).tangent.tolist() == [2.0, 10.0, 2.0]
        assert fwAD.unpack_dual(view).tangent.tolist() == [10.0, 2.0]
        x *= x  # tangent 2·x·dx
        assert fwAD.unpack_dual(x).tangent.tolist() == [8.0, 100.0, 24.0]
        with ta.no_grad():
            x.zero_()
        assert fwAD.unpack_dual(x).tangent is None


def test_piecewise_constant_functions_have_a_zero_tangent():
    leaf = compat.tensor(np.array([0.4, 1.6]), requires_grad=True)
    with fwAD.dual_level():
        rounded = fwAD.make_dual(leaf, compat.tensor(np.array([1.0, 1.0]))).round()
        assert fwAD.unpack_dual(rounded).tangent.tolist() == [0.0, 0.0]
