"""The fast layer's thread pool (``tinyattn.fast.parallel``) and the kernels that use it.

- Every pooled kernel gives bit for bit the same arrays pooled as on one thread: the same pieces
  (``piece_elements`` lowered so that small shapes are cut), run once with ``pool_min_elements=0``
  and once with the pool out of reach; float32 and float64, shapes around the piece size.
- The pool runs tasks on more than one thread when it applies, and on the calling thread when the
  schedule says so, below the threshold, for non-NumPy arrays and inside a pooled task.
- A compiled layer's blocks (``ta.compile``) run their products over the pool by their own decisions.
- A task's exception reaches the caller; the pool starts again after ``shutdown``, works in a
  forked child, and lets the interpreter exit.
"""

import io
import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info

import tinyattn as ta
from tinyattn import backend
from tinyattn.fast import attention, kernels, parallel, router, tuning
from tinyattn.fast.blocked import blocked_attention

NEVER = 1 << 62
MULTICORE = pytest.mark.skipif(router.thread_count() < 2, reason="the pool has one thread on this machine")


def layer_norm(x, weight, bias, eps):
    """``kernels.layer_norm_rows`` on the router's schedule for ``x``, as the fast nodes call it."""
    return kernels.layer_norm_rows(x, weight, bias, eps, router.row_schedule(x, *x.shape))


def bias_relu(z, bias):
    return kernels.bias_relu(z, bias, router.elementwise_schedule(z))


def bias_gelu(z, bias, approximate, slope=True):
    return kernels.bias_gelu(z, bias, approximate, router.gelu_schedule(z), slope=slope)


def pooled_and_single(fn, piece_elements):
    """``fn()`` with the pool on every pass, then with the pool out of reach; the same pieces both times."""
    pieces = dict(piece_elements=piece_elements, gelu_piece_elements=piece_elements)
    with tuning.tuned(pool_min_elements=0, **pieces):
        pooled = fn()
    with tuning.tuned(pool_min_elements=NEVER, **pieces):
        single = fn()
    return pooled, single


def assert_identical(pooled, single):
    for a, b in zip(pooled, single):
        if a is None:
            assert b is None
        else:
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b, strict=True)


dtypes = st.sampled_from([np.float32, np.float64])
piece_sizes = st.integers(1, 200)


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 24), affine=st.booleans(), dtype=dtypes, pieces=piece_sizes,
       seed=st.integers(0, 2**31 - 1))
def test_layer_norm_rows_pooled_is_bit_identical(M, N, affine, dtype, pieces, seed):
    rng = np.random.default_rng(seed)
    x, grad = (rng.standard_normal((M, N)).astype(dtype) for _ in range(2))
    weight, bias = (rng.standard_normal(N).astype(dtype) for _ in range(2)) if affine else (None, None)

    def run():
        y, saved = layer_norm(x, weight, bias, 1e-5)
        return (y, saved[0], saved[1], *kernels.layer_norm_rows_backward(grad, saved))

    pooled, single = pooled_and_single(run, pieces)
    assert_identical(pooled, single)
    with tuning.tuned(piece_elements=NEVER):  # one piece: the whole-array form
        whole = run()
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for a, b in zip(pooled, whole):  # the pieces compute what the whole-array form does, to round-off
        if a is not None:
            np.testing.assert_allclose(a, b, **tol)


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 40), F=st.integers(1, 24), dtype=dtypes, pieces=piece_sizes, seed=st.integers(0, 2**31 - 1))
def test_relu_pooled_is_bit_identical(M, F, dtype, pieces, seed):
    rng = np.random.default_rng(seed)
    z, bias, grad = rng.standard_normal((M, F)).astype(dtype), rng.standard_normal(F).astype(dtype), \
        rng.standard_normal((M, F)).astype(dtype)

    def run():
        a, g = bias_relu(z.copy(), bias), grad.copy()
        return a, kernels.relu_backward(g, a, router.elementwise_schedule(g))

    pooled, single = pooled_and_single(run, pieces)
    assert_identical(pooled, single)


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 30), N=st.integers(1, 24), dtype=dtypes, pieces=piece_sizes, seed=st.integers(0, 2**31 - 1),
       offset=st.sampled_from([0.0, 48.5, 1e3, -7.3e5]))
def test_layer_norm_rows_of_constant_and_nearly_constant_rows(M, N, dtype, pieces, seed, offset):
    """A constant row gives exactly 0 (as PyTorch's LayerNorm does), and a row whose spread is far below its mean
    comes out as the float64 formula gives it on the same values, not as the mean's rounding error times 1/√eps."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, N))
    kind = rng.integers(0, 3, M)  # 0: random, 1: constant, 2: nearly constant
    x[kind == 1] = offset + rng.standard_normal(((kind == 1).sum(), 1))
    x[kind == 2] = offset + 1e-3 * rng.standard_normal(((kind == 2).sum(), N))
    x = x.astype(dtype)

    def run():
        y, saved = layer_norm(x, None, None, 1e-5)
        return y, saved[1]

    pooled, single = pooled_and_single(run, pieces)
    assert_identical(pooled, single)
    y = pooled[0]
    assert (y[kind == 1] == 0).all()
    shifted = x.astype(np.longdouble) - x[:, :1]  # the formula, without its own cancellation (x86: 64-bit mantissa)
    exact = (shifted - shifted.mean(1, keepdims=True)) / np.sqrt(shifted.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, exact.astype(np.float64), rtol=0, atol=1e-4 if dtype == np.float32 else 1e-9)


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 40), F=st.integers(1, 24), dtype=dtypes, approximate=st.sampled_from(["none", "tanh"]),
       pieces=piece_sizes, seed=st.integers(0, 2**31 - 1))
def test_gelu_pooled_is_bit_identical(M, F, dtype, approximate, pieces, seed):
    rng = np.random.default_rng(seed)
    z, bias, grad = (rng.standard_normal(shape).astype(dtype) * 3 for shape in ((M, F), (F,), (M, F)))

    def run():
        a, slope = bias_gelu(z.copy(), bias, approximate)
        return (a, slope, kernels.gelu_backward_rows(grad.copy(), slope),
                bias_gelu(z.copy(), bias, approximate, slope=False)[0])

    pooled, single = pooled_and_single(run, pieces)
    assert_identical(pooled, single)
    a, slope, grad_z, a_alone = pooled
    np.testing.assert_array_equal(a_alone, a)  # without the slope: the same bits
    # and the pieces compute GELU and its gradient against torch's
    z_plus_b = torch.from_numpy(z + bias).double().requires_grad_()
    expected = torch.nn.functional.gelu(z_plus_b, approximate=approximate)
    expected.backward(torch.from_numpy(grad).double())
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a, expected.detach().numpy(), **tolerance)
    np.testing.assert_allclose(grad_z, z_plus_b.grad.numpy(), **tolerance)


@st.composite
def attention_cases(draw):
    B, H = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    Lq, Lk, E, Ev = draw(st.integers(1, 12)), draw(st.integers(1, 12)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    return dict(B=B, H=H, Lq=Lq, Lk=Lk, E=E, Ev=Ev, dtype=draw(dtypes), pieces=draw(piece_sizes),
                mask=draw(st.sampled_from(["none", "bool", "padding", "float", "float_inf"])),
                is_causal=draw(st.booleans()), dropout_p=draw(st.sampled_from([0.0, 0.0, 0.3])),
                seed=draw(st.integers(0, 2**31 - 1)))


def attention_inputs(case):
    rng = np.random.default_rng(case["seed"])
    B, H, Lq, Lk, E, Ev, dtype = (case[k] for k in ("B", "H", "Lq", "Lk", "E", "Ev", "dtype"))
    q, k = (rng.standard_normal((B, H, n, E)).astype(dtype) for n in (Lq, Lk))
    v, grad = rng.standard_normal((B, H, Lk, Ev)).astype(dtype), rng.standard_normal((B, H, Lq, Ev)).astype(dtype)
    float_mask = allowed = None
    if case["mask"] == "bool":
        allowed = rng.random((B, H, Lq, Lk)) < 0.7
        allowed[..., 0, :] = False  # a query with no key
    elif case["mask"] == "padding":
        allowed = rng.random((B, 1, 1, Lk)) < 0.7
    elif case["mask"].startswith("float"):
        float_mask = rng.standard_normal((Lq, Lk)).astype(dtype)
        if case["mask"] == "float_inf":
            float_mask[rng.random((Lq, Lk)) < 0.3] = -math.inf
    return q, k, v, grad, float_mask, allowed


@settings(max_examples=60, deadline=None)
@given(case=attention_cases())
def test_attention_pooled_is_bit_identical(case):
    q, k, v, grad, float_mask, allowed = attention_inputs(case)
    scale = 1 / math.sqrt(case["E"])

    def run():
        ta.manual_seed(case["seed"])  # the same dropout draw both times
        return run_attention(q, k, v, grad, float_mask, allowed, case["is_causal"], scale, case["dropout_p"])

    pooled, single = pooled_and_single(run, case["pieces"])
    assert_identical(pooled, single)
    assert not np.isnan(pooled[0]).any()  # rows with no key give zeros
    assert_close_to_whole(run, pooled, case["dtype"])


def run_attention(q, k, v, grad, float_mask, allowed, is_causal, scale, dropout_p):
    """``(O, P, M, dQ, dK, dV, dmask)`` of the tiled kernel under the router's schedule for these arrays."""
    schedule = router.attention_schedule(q, k, v)
    out, arrays = attention.attention(q, k, v, float_mask, allowed, is_causal, scale, dropout_p, schedule)
    mask_shape = None if float_mask is None else float_mask.shape
    grads = attention.attention_backward(grad, arrays, schedule, scale, mask_shape)
    return (out, arrays.weights, arrays.keep, *grads)


def assert_close_to_whole(run, pieces, dtype):
    """The pieces compute what the one-piece form (``_attention_whole``…) does, to round-off."""
    with tuning.tuned(piece_elements=NEVER):
        whole = run()
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for a, b in zip(pieces, whole):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(a, b, **tol)


@pytest.mark.parametrize("mask", ["none", "padding", "float_inf"])
def test_attention_pieces_of_several_batch_elements(mask):
    """Where a piece holds every head of a batch element, it takes several batch elements (``batch_slices``): pooled
    bit for bit as one after another, and the one-piece form's result to round-off, masks included."""
    case = dict(B=9, H=2, Lq=5, Lk=5, E=3, Ev=4, dtype=np.float32, pieces=200, mask=mask, is_causal=mask == "none",
                dropout_p=0.0, seed=3)
    q, k, v, grad, float_mask, allowed = attention_inputs(case)
    with tuning.tuned(piece_elements=case["pieces"]):
        pieces = [index for index, _ in router.attention_schedule(q, k, v).units]
    # 200 // (25 · 2) = 4 batch elements would fit a piece, but 9 // MIN_BATCH_PIECES = 2 leaves four pieces or more
    assert tuning.values.min_batch_pieces == 4
    assert pieces == [(slice(b, min(b + 2, 9)), slice(None)) for b in range(0, 9, 2)]
    scale = 1 / math.sqrt(case["E"])

    def run():
        out, weights, _, *grads = run_attention(q, k, v, grad, float_mask, allowed, case["is_causal"], scale, 0.0)
        return (out, weights, *grads)

    pooled, single = pooled_and_single(run, case["pieces"])
    assert_identical(pooled, single)
    assert_close_to_whole(run, pooled, case["dtype"])


@settings(max_examples=40, deadline=None)
@given(case=attention_cases())
def test_packed_attention_pooled_is_bit_identical(case):
    case = dict(case, Lk=case["Lq"], Ev=case["E"])
    q, k, v, grad, float_mask, allowed = attention_inputs(case)
    qkv = np.stack([q, k, v])  # (3, B, H, L, D)
    B, H, L, D = q.shape
    merged_grad = grad.transpose(0, 2, 1, 3).reshape(B, L, H * D)
    scale = 1 / math.sqrt(D)

    def run():
        ta.manual_seed(case["seed"])
        schedule = router.attention_schedule(qkv[0], qkv[1], qkv[2])
        out, arrays = attention.packed_attention(qkv, float_mask, allowed, case["is_causal"], scale,
                                                 case["dropout_p"], schedule)
        grad_qkv, grad_mask = attention.packed_attention_backward(merged_grad, arrays, schedule, scale,
                                                                  None if float_mask is None else float_mask.shape)
        return out, arrays.weights, arrays.keep, grad_qkv, grad_mask

    pooled, single = pooled_and_single(run, case["pieces"])
    assert_identical(pooled, single)
    assert_close_to_whole(run, pooled, case["dtype"])


@settings(max_examples=40, deadline=None)
@given(case=attention_cases(), block_size=st.integers(1, 6))
def test_blocked_attention_pooled_is_bit_identical(case, block_size):
    """The blocked path's elementwise steps go over the pool a few batch slices at a time; its GEMMs stay whole."""
    q, k, v, grad, float_mask, allowed = attention_inputs(dict(case, dropout_p=0.0))
    mask = float_mask if float_mask is not None else allowed

    def run():
        leaves = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
        attn_mask = None if mask is None else ta.tensor(mask, requires_grad=mask.dtype != np.bool_)
        out = blocked_attention(*leaves, attn_mask, case["is_causal"], 1 / math.sqrt(case["E"]), block_size)
        out.backward(ta.tensor(grad))
        return (out.numpy(), *[t.grad for t in leaves], None if attn_mask is None else attn_mask.grad)

    pooled, single = pooled_and_single(run, case["pieces"])
    assert_identical(pooled, single)
    assert not np.isnan(pooled[0]).any()  # rows with no key give zeros
    assert_close_to_whole(run, pooled, case["dtype"])


def test_pieces_depend_on_the_shape_only():
    with tuning.tuned(piece_elements=100):
        assert router.pieces(10, 10) == [(0, 10)]
        assert router.pieces(25, 10) == [(0, 9), (9, 18), (18, 25)]
        assert router.pieces(25, 10, most_items=5) == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 25)]
        assert router.pieces(0, 10) == [(0, 0)]


# ----------------------------------------------------------------------------- where the pool runs


def threads_used(pooled, ranges=((0, 1), (1, 2))):
    """The threads that ran two pieces; two threads only if both ran at once (a barrier joins them)."""
    seen, barrier = set(), threading.Barrier(2, timeout=0.5)

    def task(start, stop):
        seen.add(threading.get_ident())
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass  # ran one after another

    parallel.run(task, list(ranges), pooled)
    return seen


@MULTICORE
def test_the_pool_runs_pieces_on_two_threads_at_once():
    assert len(threads_used(True)) == 2


def test_the_router_keeps_the_pool_off_where_it_does_not_apply():
    me = {threading.get_ident()}
    assert threads_used(False) == me  # the schedule says no
    assert threads_used(True, ranges=[(0, 4)]) == me  # one piece
    rows = np.zeros((4, 250))
    with tuning.tuned(piece_elements=250):  # four pieces of one row
        with tuning.tuned(pool_min_elements=1001):  # below the threshold
            assert router.row_schedule(rows, 4, 250) == router.RowSchedule(((0, 1), (1, 2), (2, 3), (3, 4)), False)
            reason = router.why_not_pool(rows, [(0, 2), (2, 4)], 1000)
            assert reason == "1,000 elements, under the pool's threshold 1,001"
        with tuning.tuned(pool_min_elements=0):
            assert router.row_schedule(rows, 4, 250).pooled
            strict = backend.to_device(rows, "strict")  # not a NumPy array (as CuPy's): one run
            assert router.row_schedule(strict, 4, 250) == router.RowSchedule(((0, 4),), False)
            assert router.elementwise_schedule(rows) == router.row_schedule(rows, 4, 250)
            with tuning.tuned(gelu_piece_elements=500):  # GELU's pieces: two rows
                assert router.gelu_schedule(rows).ranges == ((0, 2), (2, 4))
    assert router.row_schedule(rows, 4, 250) == router.RowSchedule(((0, 4),), False)  # small: one run

    def nested(start, stop):
        inner.append(threads_used(True))

    inner = []
    parallel.run(nested, [(0, 1), (1, 2)], True)
    assert all(len(seen) == 1 for seen in inner)  # a task's own passes run on its thread


def test_a_task_error_reaches_the_caller_and_the_pool_goes_on():
    def task(start, stop):
        if start == 1:
            raise ValueError("piece 1 failed")

    with pytest.raises(ValueError, match="piece 1 failed"):
        parallel.run(task, [(0, 1), (1, 2), (2, 3)], True)
    out = np.zeros(6)
    parallel.run(lambda a, b: out.__setitem__(slice(a, b), 1), [(0, 3), (3, 6)], True)
    assert out.sum() == 6


def get_threads():
    """The thread count of the BLAS that NumPy loaded, as ``threadpoolctl`` reads it."""
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"][0]


def test_one_blas_thread_sets_the_blas_to_one_thread_and_back():
    before = get_threads()
    with parallel.one_blas_thread():
        assert get_threads() == 1
        with parallel.one_blas_thread():  # nested (or another caller's): the count comes back when the last leaves
            assert get_threads() == 1
        assert get_threads() == 1
    assert get_threads() == before
    with pytest.raises(RuntimeError, match="inside"), parallel.one_blas_thread():
        raise RuntimeError("inside")
    assert get_threads() == before


def test_thread_count_follows_the_blas_setting(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert router.thread_count() == 1
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "64")
    assert router.thread_count() == tuning.values.max_threads
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert 1 <= router.thread_count() <= tuning.values.max_threads


@MULTICORE
def test_shutdown_then_a_new_pool():
    threads_used(True)
    parallel.shutdown()
    assert len(threads_used(True)) == 2


@MULTICORE
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_the_pool_works_in_a_forked_child():
    threads_used(True)  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if its pool ran both pieces at once
        try:
            code = 0 if len(threads_used(True)) == 2 else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_interpreter_exits_with_the_pool_started():
    code = ("import numpy as np, tinyattn as ta; from tinyattn.fast import kernels, router, tuning\n"
            "with tuning.tuned(pool_min_elements=0, piece_elements=64):\n"
            "    x = np.ones((100, 16))\n"
            "    y, _ = kernels.layer_norm_rows(x, None, None, 1e-5, router.row_schedule(x, 100, 16))\n"
            "print(y.shape)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(100, 16)"


def test_a_pooled_pass_from_a_thread_of_the_users_own():
    """A large pass started from a thread the library did not make (a web server's, say) runs on the pool
    and gives what the main thread gets."""
    import threading

    z = np.random.default_rng(5).standard_normal((800, 1024)).astype(np.float32)  # above the pool's threshold
    bias = np.ones(1024, np.float32)
    expected = bias_relu(z.copy(), bias)
    assert router.elementwise_schedule(z).pooled
    results = []
    thread = threading.Thread(target=lambda: results.append(bias_relu(z.copy(), bias)))
    thread.start()
    thread.join()
    assert len(results) == 1
    np.testing.assert_array_equal(results[0], expected)


def test_attention_pieces_with_long_keys_are_not_a_few_rows_each():
    """With long keys, pieces that kept each GEMM on one BLAS thread would be 2 query rows each, every one
    reading all of K and V again (L = 4096 took 5× longer): they have at least head_size rows, unpooled."""
    like = np.empty(1, np.float32)
    ranges, pooled = router._query_runs(like, 4096, 4096, (1, 8), 64)
    assert min(stop - start for start, stop in ranges) >= 64 and not pooled
    ranges, pooled = router._query_runs(like, 128, 128, (8, 8), 32)  # medium: pooled, one BLAS thread each
    assert len(ranges) > 1 and pooled
    assert max(stop - start for start, stop in ranges) * 128 * 32 <= tuning.values.blas_one_thread_mnk


# ----------------------------------------------------------------------------- products over the pool


@settings(max_examples=30, deadline=None)
@given(M=st.integers(1, 300), K=st.integers(1, 300), N=st.integers(1, 300), dtype=dtypes,
       layout=st.sampled_from(["C", "a transposed", "b transposed"]), seed=st.integers(0, 2**31 - 1))
def test_matmul_over_the_pool_is_the_product_and_pooled_bit_identical(monkeypatch, M, K, N, dtype, layout, seed):
    """Inside ``over_pool``, ``parallel.matmul`` is ``a @ b`` to round-off, for row-major operands and
    transposed views alike (as the blocks pass ``Wᵀ`` and ``Gᵀ``); pooled, it gives bit for bit what its pieces
    give one after another."""
    monkeypatch.setattr(tuning.values, "blas_one_thread_mnk", 0)  # every product is cut here, however small
    monkeypatch.setattr(router, "thread_count", lambda: 3)  # three pieces, whatever the machine
    monkeypatch.setattr(parallel._products, "on_pool", True)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if layout == "a transposed" else (M, K)).astype(dtype)
    b = rng.standard_normal((N, K) if layout == "b transposed" else (K, N)).astype(dtype)
    a, b = (a.T if layout == "a transposed" else a), (b.T if layout == "b transposed" else b)
    pooled, single = pooled_and_single(lambda: (parallel.matmul(a, b),), 1 << 18)
    assert_identical(pooled, single)
    product = pooled[0]
    assert product.shape == (M, N) and product.dtype == dtype
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(product, a.astype(np.float64) @ b.astype(np.float64), **tol)


def test_matmul_is_the_blas_product_outside_a_block_for_small_products_and_one_thread(monkeypatch):
    """Outside ``over_pool``, for a product OpenBLAS runs on one thread anyway (m·n·k up to
    ``BLAS_ONE_THREAD_MNK``) and with one thread, ``matmul`` is ``a @ b`` itself: the same bits, no task."""
    rng = np.random.default_rng(0)
    a, b, small = rng.standard_normal((256, 96)), rng.standard_normal((96, 64)), rng.standard_normal((96, 8))
    ran = []
    monkeypatch.setattr(parallel, "run", lambda *args, **kw: ran.append(args))
    np.testing.assert_array_equal(parallel.matmul(a, b), a @ b, strict=True)  # outside a block
    monkeypatch.setattr(parallel._products, "on_pool", True)
    np.testing.assert_array_equal(parallel.matmul(a, small), a @ small, strict=True)  # 256·8·96 ≤ 2¹⁹
    monkeypatch.setattr(router, "thread_count", lambda: 1)
    np.testing.assert_array_equal(parallel.matmul(a, b), a @ b, strict=True)
    assert ran == []
    monkeypatch.setattr(router, "thread_count", lambda: 2)
    parallel.matmul(a, b)  # 256·64·96 > 2¹⁹
    assert len(ran) == 1 and ran[0][1] == ((0, 128), (128, 256))  # one piece of rows per thread


def test_blocks_large_enough_for_the_pool_record_with_openblas_on_one_thread(monkeypatch):
    """``over_pool``: a block whose passes go to the pool runs its forward (while a graph is recorded) and its
    backward with OpenBLAS on one thread; inference, a block too small for the pool and the setting off keep
    OpenBLAS's threads."""
    from tinyattn.fast import blocks

    before, seen, in_backward = get_threads(), [], []
    if before < 2:
        pytest.skip("OpenBLAS runs one thread here: one thread and its own threads look the same")
    monkeypatch.setattr(blocks, "times_weight_t", lambda a, w: seen.append(get_threads()) or a @ w.T)
    norm_backward = blocks.layer_norm_rows_backward
    monkeypatch.setattr(blocks, "layer_norm_rows_backward",
                        lambda *args: in_backward.append(get_threads()) or norm_backward(*args))
    layer = ta.compile(ta.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 8), dtype=np.float32), requires_grad=True)
    with tuning.tuned(pool_min_elements=0):  # every pass is large enough here
        y = layer(x)  # records: both blocks' forwards (out_proj's product, then the feed-forward's two)
        y.backward(ta.ones_like(y))
        assert seen == [1, 1, 1] and in_backward == [1, 1]  # post-norm: each backward starts with the norm's
        with ta.no_grad():
            layer(x)
        with tuning.tuned(products_on_pool=False):
            layer(x).backward(ta.ones_like(y))
    layer(x).backward(ta.ones_like(y))  # 2·3·16 hidden activations, 2·2·3·3 scores: under the default threshold
    assert seen[3:] == [before] * 9 and in_backward[2:] == [before] * 4
    assert get_threads() == before


def test_the_router_says_where_a_blocks_products_run():
    """``router.why_not_products_on_pool`` decides for both blocks, and ``ta.explain`` prints its answer for each
    (as it would be while a graph is recorded); ``tuning.tuned(products_on_pool=False)`` turns it off."""
    threshold = tuning.values.pool_min_elements
    assert router.why_not_products_on_pool(threshold) is None
    assert "under the pool's threshold" in router.why_not_products_on_pool(threshold - 1)
    with tuning.tuned(products_on_pool=False):
        assert router.why_not_products_on_pool(threshold) == "turned off (fast.tuning: products_on_pool=False)"
    assert tuning.values.products_on_pool is True
    layer = ta.compile(ta.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
    x = ta.tensor(np.zeros((2, 3, 8), dtype=np.float32))
    on_pool = "over the pool, OpenBLAS on one thread"
    with tuning.tuned(pool_min_elements=50):  # scores 2·2·3·3 = 36 elements, hidden activations 2·3·16 = 96
        lines = ta.explain(layer, x, file=io.StringIO()).splitlines()
    assert "  self-attention products, training: on OpenBLAS's threads (its widest pass, 36 elements, is under the " \
           "pool's threshold 50)" in lines
    assert f"  feed-forward products, training: {on_pool}" in lines



def _nodes_named(out, name):
    """The nodes of class ``name`` in ``out``'s graph."""
    found, stack, seen = [], [out._ctx], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        found += [node] if type(node).__name__ == name else []
        stack.extend(p._ctx for p in node.parents)
    return found


@pytest.mark.parametrize("decoder", [False, True], ids=["encoder", "decoder"])
def test_each_block_runs_over_the_pool_by_its_own_decision(decoder):
    """A layer's route decides for each block by its own widest pass (``router.LayerRoute``), and each block node
    takes its own decision: with the threshold between the two passes, one block pools and the other does not."""
    rng = np.random.default_rng(0)
    layer_type = ta.nn.TransformerDecoderLayer if decoder else ta.nn.TransformerEncoderLayer
    x = ta.tensor(rng.standard_normal((2, 40, 64), dtype=np.float32), requires_grad=True)  # scores 2·4·40·40 = 12,800
    args = (x, ta.tensor(rng.standard_normal((2, 12, 64), dtype=np.float32))) if decoder else (x,)
    for hidden, threshold, expected in ((128, 12_000, (True, False)),  # hidden activations 80·128 = 10,240
                                        (256, 15_000, (False, True))):  # 80·256 = 20,480
        layer = ta.compile(layer_type(64, 4, dim_feedforward=hidden, dropout=0.0))
        with tuning.tuned(pool_min_elements=threshold):
            out = layer(*args)
        (attention_block,), (feed_forward_block,) = (_nodes_named(out, name)
                                                     for name in ("SelfAttentionBlock", "FeedForwardBlock"))
        assert (attention_block.on_pool, feed_forward_block.on_pool) == expected, hidden
        out.backward(ta.ones_like(out))  # each backward runs by its node's decision
