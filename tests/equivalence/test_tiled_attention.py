"""The one tiled attention kernel (``fast.attention``) under each schedule the router gives.

Every schedule cuts the same ``(…, Lq, Lk)`` scores: one tile, batch slices, runs of query rows (with backward's
pass by runs of keys), several key tiles combined by the online softmax, sequences laid back to back. Each is
forced through ``fast.tuning.tuned`` and must give, through the compiled ``F.scaled_dot_product_attention``
(``ta.compile``), the reference attention's output and gradients (float64,
hypothesis-drawn shapes and masks, a random upstream gradient), and the schedule the kernel runs is the one
``router.attention_schedule`` returned.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn.functional as F
from tinyattn.fast import attention, router, tuning

SCHEDULES = ("one tile", "batch slices", "query runs", "key blocks")


def kind(schedule):
    """The name of a ``TileSchedule``'s family."""
    if schedule.keeps == "lse":
        return "key blocks"
    if schedule.one_tile:
        return "one tile"
    return "query runs" if schedule.key_units else "batch slices"


@st.composite
def cases(draw, schedule):
    B, H = draw(st.integers(2, 3)), draw(st.integers(1, 3))
    Lq, Lk = draw(st.integers(2, 7)), draw(st.integers(3, 7))
    E, Ev = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    broadcast = schedule == "query runs"  # K and V shared by the batch: no batch slices
    return dict(
        q=(B, H, Lq, E), k=(1 if broadcast else B, H, Lk, E), v=(1 if broadcast else B, H, Lk, Ev),
        mask=draw(st.sampled_from(["none", "bool", "padding", "float"])), is_causal=draw(st.booleans()),
        pooled=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)),
    )


def tuning_for(schedule, case):
    """``fast.tuning`` values that make the router choose ``schedule`` for ``case``."""
    B, H, Lq, _ = case["q"]
    values = dict(pool_min_elements=0 if case["pooled"] else 1 << 62)
    if schedule == "batch slices":
        values["piece_elements"] = Lq * case["k"][2]  # one slice's scores a piece
    elif schedule == "query runs":
        values["piece_elements"] = 1  # a query row a run, a key a run
    elif schedule == "key blocks":
        values.update(blocked_attention_min_keys=0, attention_block_size=2)
    return values


def inputs(case):
    rng = np.random.default_rng(case["seed"])
    q, k, v = (rng.standard_normal(case[name]) for name in ("q", "k", "v"))
    B, H, Lq, _ = case["q"]
    Lk = case["k"][2]
    mask = None
    if case["mask"] == "bool":
        mask = rng.random((B, H, Lq, Lk)) < 0.7
        mask[0, 0, 0] = False  # a query with no key
    elif case["mask"] == "padding":
        mask = rng.random((B, 1, 1, Lk)) < 0.7
    elif case["mask"] == "float":
        mask = rng.standard_normal((Lq, Lk))
    grad = rng.standard_normal((B, H, Lq, case["v"][-1]))
    return q, k, v, mask, grad


def attend(q, k, v, mask, grad, is_causal, compiled):
    """Output and gradients (q, k, v, and a float mask's) of ``F.scaled_dot_product_attention`` on tensors,
    compiled or the reference."""
    leaves = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    mask_tensor = None
    if mask is not None:
        mask_tensor = ta.tensor(mask, requires_grad=mask.dtype != np.bool_)
    function = ta.compile(F.scaled_dot_product_attention) if compiled else F.scaled_dot_product_attention
    out, _ = function(*leaves, attn_mask=mask_tensor, is_causal=is_causal, need_weights=False)
    out.backward(ta.tensor(grad))
    if mask_tensor is not None and mask_tensor.requires_grad:
        leaves.append(mask_tensor)
    grads = [t.grad for t in leaves]
    return out.numpy(), grads


@pytest.mark.parametrize("schedule", SCHEDULES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_each_schedule_gives_the_references_values_and_gradients(monkeypatch, schedule, data):
    case = data.draw(cases(schedule), label="case")
    q, k, v, mask, grad = inputs(case)
    expected, expected_grads = attend(q, k, v, mask, grad, case["is_causal"], compiled=False)
    given_schedules, received = [], []
    original_schedule, original_attention = router.attention_schedule, attention.attention

    def schedule_spy(*args, **kw):
        given_schedules.append(original_schedule(*args, **kw))
        return given_schedules[-1]

    def attention_spy(*args, **kw):
        received.append(args[8])  # the schedule argument
        return original_attention(*args, **kw)

    monkeypatch.setattr(router, "attention_schedule", schedule_spy)
    monkeypatch.setattr(attention, "attention", attention_spy)
    with tuning.tuned(**tuning_for(schedule, case)):
        out, grads = attend(q, k, v, mask, grad, case["is_causal"], compiled=True)
    monkeypatch.undo()
    assert len(received) == 1 and received[0] is given_schedules[0]  # the kernel runs the router's schedule
    assert kind(received[0]) == schedule
    if schedule == "key blocks":  # tiles of 2 keys; causal: none past the last query
        Lq, Lk = case["q"][2], case["k"][2]
        starts = [start for start in range(0, Lk, 2) if not case["is_causal"] or start < Lq]
        assert [tile[2] for tile in received[0].units[0][1]] == starts
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)
    assert len(grads) == len(expected_grads)
    for got, want in zip(grads, expected_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(0, 6), min_size=1, max_size=4), H=st.integers(1, 3), D=st.integers(1, 4),
       seed=st.integers(0, 2**31 - 1))
def test_the_sequences_schedule_gives_the_references_values(lengths, H, D, seed):
    """One unit per sequence, its rows against its own keys: each sequence's rows are the reference attention of
    that sequence alone."""
    rng = np.random.default_rng(seed)
    T = sum(lengths)
    q, k, v = (rng.standard_normal((H, T, D)) for _ in range(3))
    cu_seqlens = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    schedule = router.sequence_schedule(cu_seqlens, T)
    assert [tiles for _, tiles in schedule.units] == [((a, b, a, b),) for a, b in zip(cu_seqlens, cu_seqlens[1:])
                                                       if b > a]
    out = attention.attention_by_sequences(q, k, v, schedule, 1 / np.sqrt(D), np.empty((H, T, D)))
    for a, b in zip(cu_seqlens, cu_seqlens[1:]):
        if b > a:
            expected, _ = F.scaled_dot_product_attention(*(ta.tensor(x[:, a:b]) for x in (q, k, v)),
                                                         need_weights=False)
            np.testing.assert_allclose(out[:, a:b], expected.numpy(), rtol=1e-10, atol=1e-12)


def test_the_router_gives_each_schedule_for_its_shapes():
    """Default tuning: small attention is one tile, the benchmark's medium and large batch slices over the pool,
    a broadcast batch with large scores runs of queries, and the memory-lean route key tiles."""
    def arrays(*shape):
        return np.empty(shape, np.float32)

    small = arrays(2, 4, 16, 8)
    assert kind(router.attention_schedule(small, small, small)) == "one tile"
    medium = arrays(8, 8, 128, 32)
    schedule = router.attention_schedule(medium, medium, medium)
    assert kind(schedule) == "batch slices" and schedule.one_blas_thread and len(schedule.units) > 1
    query, shared = arrays(8, 8, 256, 32), arrays(1, 8, 256, 32)
    assert kind(router.attention_schedule(query, shared, shared)) == "query runs"
    long = arrays(1, 2, 600, 16)
    block = router.key_block_size(long, long, long)
    schedule = router.attention_schedule(long, long, long, is_causal=True, key_block=256)
    assert block == tuning.values.attention_max_block and kind(schedule) == "key blocks"
    assert [tile for tile in schedule.units[0][1]] == [(0, 600, 0, 256), (256, 600, 256, 512), (512, 600, 512, 600)]
