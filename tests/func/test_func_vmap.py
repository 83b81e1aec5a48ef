"""``ta.func.vmap``: every case of ``func_cases`` mapped over a drawn batch axis of every argument (or ``None``
for some), against a Python loop over the examples (stacked at ``out_dims``) and against ``torch.func.vmap``;
``chunk_size``; nested ``vmap`` with different ``in_dims``; nested ``in_dims``; batched indices and targets;
the ``nn`` layers called inside ``vmap``; per-example gradients of a small Transformer through
``vmap(grad(loss))`` and ``functional_call``; and the errors and randomness modes torch.func has.
"""

import numpy as np
import pytest
import torch
from func_cases import IDS, SPECS, as_tuple, assert_trees_close, functions, ours, theirs
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from torch.nn.attention import SDPBackend, sdpa_kernel

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import func
from tinyattn import testing as tt

RTOL, ATOL = 1e-9, 1e-11


@pytest.fixture(autouse=True)
def torch_math_attention():
    with sdpa_kernel(SDPBackend.MATH):
        yield


def _examples(array, rng, batch):
    """``batch`` examples near ``array``: the same signs and order of magnitude (away from kinks)."""
    return [array] + [array * rng.uniform(0.5, 1.5, array.shape) for _ in range(batch - 1)]


def _stack(examples, dim):
    return np.stack(examples, axis=dim)


def _loop(fn, examples_by_arg, in_dims, batch, out_dims):
    """The oracle: ``fn`` on each example alone, the outputs stacked at ``out_dims``."""
    results = [as_tuple(fn(*[examples[k] if d is not None else examples for examples, d in
                             zip(examples_by_arg, in_dims)])) for k in range(batch)]
    dims = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(results[0])
    return tuple(ta.stack(list(column), d) for column, d in zip(zip(*results), dims))


def _draw_batch(spec, data):
    arrays, options = data.draw(spec.case, label="case")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    batch = data.draw(st.integers(1, 3), label="batch")
    in_dims = [data.draw(st.none() | st.integers(-a.ndim - 1, a.ndim), label=f"in_dim {i}")
               for i, a in enumerate(arrays)]
    if all(d is None for d in in_dims):
        in_dims[data.draw(st.integers(0, len(arrays) - 1), label="mapped")] = 0
    examples = [_examples(a, rng, batch) if d is not None else a for a, d in zip(arrays, in_dims)]
    batched = [_stack(e, d) if d is not None else e for e, d in zip(examples, in_dims)]
    return arrays, options, batch, tuple(in_dims), examples, batched


def _out_dims(data, ndims, single):
    if single:
        return data.draw(st.integers(-ndims[0] - 1, ndims[0]), label="out_dims")
    if data.draw(st.booleans(), label="one out_dim for all"):
        low = min(ndims)
        return data.draw(st.integers(-low - 1, low), label="out_dims")
    return tuple(data.draw(st.integers(-n - 1, n), label=f"out_dim {k}") for k, n in enumerate(ndims))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_vmap_matches_a_loop_and_torch(spec, data):
    arrays, options, batch, in_dims, examples, batched = _draw_batch(spec, data)
    ours_fn, theirs_fn = functions(spec, options)
    first = theirs_fn(*[theirs(a) for a in arrays])
    single = isinstance(first, torch.Tensor)
    out_dims = _out_dims(data, [o.ndim for o in as_tuple(first)], single)
    chunk_size = data.draw(st.none() | st.integers(1, 3), label="chunk_size")

    got = func.vmap(ours_fn, in_dims=in_dims, out_dims=out_dims, chunk_size=chunk_size)(*[ours(b) for b in batched])
    loop = _loop(ours_fn, [[ours(e) for e in ex] if d is not None else ours(ex) for ex, d in zip(examples, in_dims)],
                 in_dims, batch, out_dims)
    assert_trees_close(as_tuple(got), tuple(torch.from_numpy(t.numpy()) for t in loop), RTOL, ATOL,
                       where="vmap vs a loop")
    # torch.func.vmap (2.13) can crash the process on a negative out_dims, and fails to place an output that is
    # the same for every example at out_dims > 0: torch maps to the front, and the axis is moved here
    ndims = [o.ndim + 1 for o in as_tuple(first)]
    dims = [(out_dims if isinstance(out_dims, int) else out_dims[k]) % n for k, n in enumerate(ndims)]
    front = torch.func.vmap(theirs_fn, in_dims=in_dims, chunk_size=chunk_size)(*[theirs(b) for b in batched])
    expected = tuple(torch.movedim(t, 0, d) for t, d in zip(as_tuple(front), dims))
    expected = expected[0] if single else expected
    assert_trees_close(got, expected, RTOL, ATOL, where="vmap vs torch.func.vmap")


NESTED = [s for s in SPECS if s.name in ("binary_broadcast", "reductions", "matmul", "index_array", "softmax",
                                         "layer_norm", "attention", "cat_stack_split")]


@pytest.mark.parametrize("spec", NESTED, ids=[s.name for s in NESTED])
@given(data=st.data())
def test_nested_vmap_with_different_in_dims_matches_a_double_loop(spec, data):
    arrays, options = data.draw(spec.case, label="case")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    outer, inner = data.draw(st.integers(1, 3), label="outer"), data.draw(st.integers(1, 3), label="inner")
    inner_dims = [data.draw(st.none() | st.integers(0, a.ndim), label="inner dim") for a in arrays]
    inner_dims[0] = 0 if all(d is None for d in inner_dims) else inner_dims[0]
    batched = []
    for a, d in zip(arrays, inner_dims):
        b = a if d is None else _stack(_examples(a, rng, inner), d)
        batched.append(b)
    outer_dims = [data.draw(st.none() | st.integers(0, b.ndim), label="outer dim") for b in batched]
    outer_dims[-1] = 0 if all(d is None for d in outer_dims) else outer_dims[-1]
    batched = [b if d is None else _stack(_examples(b, rng, outer), d) for b, d in zip(batched, outer_dims)]
    ours_fn, _ = functions(spec, options)
    got = func.vmap(func.vmap(ours_fn, in_dims=tuple(inner_dims)), in_dims=tuple(outer_dims), out_dims=1)(
        *[ours(b) for b in batched])

    def example(o, i):  # the arguments of outer example o, inner example i
        args = [b if d is None else np.take(b, o, axis=d) for b, d in zip(batched, outer_dims)]
        return [a if d is None else np.take(a, i, axis=d) for a, d in zip(args, inner_dims)]
    rows = [[as_tuple(ours_fn(*[ours(a) for a in example(o, i)])) for o in range(outer)] for i in range(inner)]
    expected = tuple(torch.from_numpy(np.stack([np.stack([row[o][k].numpy() for o in range(outer)])
                                                for row in rows])) for k in range(len(rows[0][0])))
    # (torch.func's nested vmap of cat (2.13) fails on some of these in_dims: a loop over both levels instead)
    assert_trees_close(as_tuple(got), expected, RTOL, ATOL, where="vmap(vmap) vs a double loop")


@given(batch=st.integers(1, 4), n=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_nested_in_dims_and_out_dims(batch, n, seed):
    rng = np.random.default_rng(seed)
    a, b, c = rng.standard_normal((batch, n)), rng.standard_normal((n,)), rng.standard_normal((n, batch))

    def f(pair, last):
        first, rest = pair
        return {"sum": first * rest["b"] + last, "pair": (first.tanh(), rest["b"] * last)}
    in_dims, out_dims = ((0, {"b": None}), 1), {"sum": 0, "pair": (1, 0)}
    got = func.vmap(f, in_dims=in_dims, out_dims=out_dims)((ours(a), {"b": ours(b)}), ours(c))
    expected = torch.func.vmap(f, in_dims=in_dims, out_dims=out_dims)((theirs(a), {"b": theirs(b)}), theirs(c))
    assert_trees_close(got, expected, where="nested in_dims")


@given(batch=st.integers(1, 3), n=st.integers(1, 4), c=st.integers(2, 4), seed=st.integers(0, 2**32 - 1),
       data=st.data())
def test_batched_indices_and_targets(batch, n, c, seed, data):
    """An integer index or a target that differs per example (embedding rows, cross_entropy's classes)."""
    rng = np.random.default_rng(seed)
    weight, logits = rng.standard_normal((c, 3)), rng.standard_normal((batch, n, c))
    idx = data.draw(hnp.arrays(np.int64, (batch, n), elements=st.integers(0, c - 1)), label="indices")
    got = func.vmap(lambda i, w: F.embedding(i, w).tanh(), in_dims=(0, None))(ours(idx), ours(weight))
    expected = torch.func.vmap(lambda i, w: torch.nn.functional.embedding(i, w).tanh(), in_dims=(0, None))(
        theirs(idx), theirs(weight))
    assert_trees_close(got, expected, where="embedding")
    got = func.vmap(F.cross_entropy)(ours(logits), ours(idx))
    expected = torch.func.vmap(torch.nn.functional.cross_entropy)(theirs(logits), theirs(idx))
    assert_trees_close(got, expected, where="cross_entropy")
    got = func.vmap(lambda x, i: x[i], in_dims=(None, 0))(ours(weight), ours(idx))
    expected = torch.func.vmap(lambda x, i: x[i], in_dims=(None, 0))(theirs(weight), theirs(idx))
    assert_trees_close(got, expected, where="x[batched index]")


# ----------------------------------------------------------------------------- layers inside vmap


def _layers():
    return {
        "linear": lambda: nn.Linear(4, 3),
        "layer_norm": lambda: nn.LayerNorm(4),
        "mha": lambda: nn.MultiHeadAttention(4, 2),
        "encoder": lambda: nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0),
        "encoder_pre_gelu": lambda: nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, norm_first=True,
                                                               activation="gelu"),
    }


def _call(name, layer, x, mask):
    if name == "mha":
        return layer(x, attn_mask=mask)[0]
    if name.startswith("encoder"):
        return layer(x, src_mask=mask)
    return layer(x)


@pytest.mark.parametrize("name", list(_layers()))
@given(batch=st.integers(1, 3), b=st.integers(1, 2), length=st.integers(1, 3), in_dim=st.integers(0, 3),
       seed=st.integers(0, 2**32 - 1))
def test_layers_inside_vmap_match_a_loop(name, batch, b, length, in_dim, seed):
    ta.manual_seed(seed % 1000)
    layer = _layers()[name]().double()
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((batch, b, length, 4))
    mask = rng.random((length, length)) < 0.7
    mask[:, 0] = True
    mask_t = ours(mask)
    got = func.vmap(lambda x: _call(name, layer, x, mask_t), in_dims=in_dim)(ours(np.moveaxis(xs, 0, in_dim)))
    loop = np.stack([_call(name, layer, ours(x), mask_t).numpy() for x in xs])
    np.testing.assert_allclose(got.numpy(), loop, rtol=1e-9, atol=1e-11)


def _transformer(vocab, classes):
    ta.manual_seed(0)
    return nn.Sequential(nn.Embedding(vocab, 4), nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0),
                         nn.Linear(4, classes)).double()


@given(batch=st.integers(1, 3), length=st.integers(1, 4), data=st.data())
def test_per_example_gradients_of_a_transformer(batch, length, data):
    vocab, classes = 5, 3
    model = _transformer(vocab, classes)
    params = {k: ta.tensor(v.numpy()) for k, v in model.named_parameters()}
    tokens = data.draw(hnp.arrays(np.int64, (batch, length), elements=st.integers(0, vocab - 1)), label="tokens")
    targets = data.draw(hnp.arrays(np.int64, (batch, length), elements=st.integers(0, classes - 1)), label="targets")

    def loss(p, x, y):
        logits = func.functional_call(model, p, (x.unsqueeze(0),))  # (1, L, C)
        return F.cross_entropy(logits.reshape(-1, classes), y.reshape(-1))
    per_example = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, ours(tokens), ours(targets))
    assert sorted(per_example) == sorted(params)
    for k in range(batch):
        one = func.grad(loss)(params, ours(tokens[k]), ours(targets[k]))
        model.zero_grad()  # and the engine's own backward on the module, without any transform
        F.cross_entropy(model(ours(tokens[k:k + 1])).reshape(-1, classes), ours(targets[k])).backward()
        for name, p in model.named_parameters():
            assert per_example[name].shape == (batch,) + p.shape, name
            np.testing.assert_allclose(per_example[name].numpy()[k], one[name].numpy(), rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name}, example {k}: vmap(grad) vs grad")
            np.testing.assert_allclose(one[name].numpy(), p.grad, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name}, example {k}: grad vs backward")


# ----------------------------------------------------------------------------- errors and randomness


def _x(*shape):
    return ours(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape) / 10)


def test_mismatched_in_dims_raise_like_torch():
    x, y = _x(2, 3), _x(2, 3)
    with pytest.raises(ValueError, match="in_dims"):  # one entry for two arguments
        func.vmap(lambda a, b: a + b, in_dims=(0,))(x, y)
    with pytest.raises(ValueError, match="in_dims"):  # three for two
        func.vmap(lambda a, b: a + b, in_dims=(0, 0, 0))(x, y)
    with pytest.raises(ValueError, match="in_dims"):  # a structure the argument does not have
        func.vmap(lambda pair: pair[0] + pair[1], in_dims=((0, 0, 0),))((x, y))
    with pytest.raises(ValueError, match="in_dims"):  # a list where a tuple's entries are expected
        func.vmap(lambda a: a, in_dims="0")(x)


@pytest.mark.parametrize("in_dim", [2, -3, 5])
def test_in_dims_out_of_range_raise(in_dim):
    with pytest.raises(ValueError, match="out of range"):
        func.vmap(lambda a: a * 2, in_dims=in_dim)(_x(2, 3))
    with pytest.raises(ValueError):
        torch.func.vmap(lambda a: a * 2, in_dims=in_dim)(torch.ones(2, 3))


def test_mapped_sizes_that_differ_raise():
    with pytest.raises(ValueError, match="same size"):
        func.vmap(lambda a, b: a + b)(_x(2, 3), _x(3, 3))
    with pytest.raises(ValueError, match="same size"):
        func.vmap(lambda a, b: a + b, in_dims=(1, 0))(_x(2, 3), _x(2, 3))
    with pytest.raises(ValueError):
        func.vmap(lambda a: a, in_dims=None)(_x(2, 3))  # nothing mapped


def test_non_tensor_outputs_raise():
    x = _x(3)
    with pytest.raises(RuntimeError, match="has_aux"):
        func.grad(lambda a: ((a * a).sum(), a))(x)
    with pytest.raises(RuntimeError, match="tensor"):
        func.grad(lambda a: 3.0)(x)
    with pytest.raises(RuntimeError, match="tensor"):
        func.vjp(lambda a: [a, 1.0], x)
    with pytest.raises(ValueError, match="tensor"):
        func.vmap(lambda a: (a, "label"))(x)
    with pytest.raises(RuntimeError, match="pair"):
        func.grad(lambda a: (a * a).sum(), has_aux=True)(x)


def test_grad_of_a_non_scalar_raises():
    with pytest.raises(RuntimeError, match="one number"):
        func.grad(lambda a: a * a)(_x(3))
    with pytest.raises(RuntimeError, match="one number"):
        func.grad(lambda a: a.sum(0))(_x(2, 3))
    assert func.grad(lambda a: (a * a).reshape(1, 1))(_x(1)).numpy() == pytest.approx([0.2])  # one element is fine


def test_dropout_inside_vmap_with_randomness_error_raises():
    with pytest.raises(RuntimeError, match="random"):
        func.vmap(lambda a: F.dropout(a, 0.5))(_x(3, 8))
    with pytest.raises(RuntimeError, match="random"):
        func.vmap(lambda a: a + ta.randn(8, dtype=ta.float64))(_x(3, 8))
    with pytest.raises(ValueError, match="randomness"):
        func.vmap(lambda a: a, randomness="sometimes")


@given(batch=st.integers(2, 4), seed=st.integers(0, 2**31 - 1), in_dim=st.sampled_from([0, 1]))
def test_randomness_same_and_different(batch, seed, in_dim):
    ta.manual_seed(seed)
    ones = ta.ones(64, batch, dtype=ta.float64) if in_dim else ta.ones(batch, 64, dtype=ta.float64)
    same = func.vmap(lambda a: F.dropout(a, 0.5), in_dims=in_dim, randomness="same")(ones).numpy()
    assert same.shape == (batch, 64)
    assert set(np.unique(same)) <= {0.0, 2.0} and (same == 0).any() and (same == 2).any()
    for row in same[1:]:
        np.testing.assert_array_equal(row, same[0], err_msg="randomness='same' drew different masks")
    different = func.vmap(lambda a: F.dropout(a, 0.5), in_dims=in_dim, randomness="different")(ones).numpy()
    assert set(np.unique(different)) <= {0.0, 2.0}
    assert all((different[k] != different[0]).any() for k in range(1, batch)), "randomness='different' repeated"
    # an unmapped input still draws per example under "different", once under "same"
    shared = ta.ones(64, dtype=ta.float64)
    mixed = func.vmap(lambda a, s: F.dropout(s, 0.5) + a * 0, in_dims=(0, None), randomness="different")(
        ta.ones(batch, 1, dtype=ta.float64), shared).numpy()
    assert all((mixed[k] != mixed[0]).any() for k in range(1, batch))
    mixed = func.vmap(lambda a, s: F.dropout(s, 0.5) + a * 0, in_dims=(0, None), randomness="same")(
        ta.ones(batch, 1, dtype=ta.float64), shared).numpy()
    assert all((mixed[k] == mixed[0]).all() for k in range(1, batch))


def test_out_dims_that_do_not_match_raise():
    with pytest.raises(ValueError, match="out_dims"):
        func.vmap(lambda a: (a, a * 2), out_dims=(0, 0, 0))(_x(2, 3))
    with pytest.raises(ValueError, match="out_dims None"):
        func.vmap(lambda a: a * 2, out_dims=None)(_x(2, 3))


@given(shape=tt.shapes(min_dims=1, max_dims=2, max_side=3))
def test_out_dims_none_for_an_unmapped_output(shape):
    x = ours(np.ones(shape))
    const = ours(np.full((2,), 0.5))
    got = func.vmap(lambda a: (a * 2, const * 3), out_dims=(0, None))(x)
    expected = torch.func.vmap(lambda a: (a * 2, theirs(np.full((2,), 0.5)) * 3), out_dims=(0, None))(theirs(x.numpy()))
    assert_trees_close(got, expected, where="out_dims None")


def test_the_batched_classes_are_kept_only_while_a_tensor_of_theirs_lives():
    """Each ``vmap`` call opens a level with a new number, so a class kept for good per level would grow without
    bound; the classes live as long as their tensors (a weak table), and a long loop keeps a handful."""
    import gc

    from tinyattn.func import batching

    f = func.vmap(lambda t: (t * 2).sum())
    x = _x(4, 3)
    for _ in range(3000):
        f(x)
    gc.collect()
    assert len(batching._CLASSES) < 50
