"""Where the thread pool of the fast layer starts to pay: one pass, on one thread and pooled, by size.

    python benchmarks/pool_threshold.py             # the sweep: elements per pass, single vs pooled
    python benchmarks/pool_threshold.py --blas      # which GEMM sizes OpenBLAS runs on more than one thread
    python benchmarks/pool_threshold.py --after-blas  # a pooled pass right after a BLAS call (run it with and
                                                      # without OPENBLAS_THREAD_TIMEOUT=1 in the environment)
    python benchmarks/pool_threshold.py --after-gemm  # bias + ReLU, bias + GELU and GELU's backward gate right after
                                                      # a GEMM, by size, on one thread and pooled
    python benchmarks/pool_threshold.py --sequences  # inference on a padded batch's real tokens, attention sentence
                                                     # by sentence against on the padded batch, by batch and length
                                                     # (fast.tuning's sequence_attention_min_length)
    python benchmarks/pool_threshold.py --products-on-pool  # attention's backward alone and right after a two-thread
                                                            # GEMM; training steps with a block's products over the pool
                                                            # and with OpenBLAS's threads (products_on_pool setting)
    python benchmarks/pool_threshold.py --gelu      # GELU's pass with its slope by elements per piece
                                                    # (fast.tuning's gelu_piece_elements)
    python benchmarks/pool_threshold.py --executor  # the pool (helpers idle on queues, sharing a counter of pieces
                                                    # with the caller) against the same on a ThreadPoolExecutor, on
                                                    # attention's and LayerNorm's pooled passes and an empty one

The sweep times three passes a Transformer layer makes, each on float32 rows of width 512: ``exp`` in
place (the softmax), ReLU as ``clip(x, 0, inf)`` (the feed-forward block's form) and a LayerNorm forward
(``fast.kernels.layer_norm_rows``), each as one whole pass on this thread and as pieces spread over
``fast.parallel``'s pool (two pieces a thread), interleaved, minimum and median of many calls. The
smallest size at which the pooled pass is clearly faster is ``fast.tuning's pool_min_elements``.
"""

import argparse
import itertools
import os
import statistics
import sys
import threading
import time

if "--products-on-pool" in sys.argv:  # as benchmarks/run.py sets it, before NumPy loads
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "22")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tinyattn as ta  # noqa: E402
from tinyattn.fast import kernels, parallel, router, tuning  # noqa: E402

WIDTH = 512


def passes(rows):
    """``{name: function(pooled)}`` over ``rows (M, WIDTH)`` arrays, each pass cut into the pool's pieces."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, WIDTH), dtype=np.float32) * 0.1
    out = np.empty_like(x)
    weight, bias = np.ones(WIDTH, np.float32), np.zeros(WIDTH, np.float32)

    def exp(start, stop):
        np.exp(x[start:stop], out=out[start:stop])

    def relu(start, stop):  # as the feed-forward block runs it (kernels.bias_relu)
        np.clip(x[start:stop], np.float32(0), np.float32(np.inf), out=out[start:stop])

    threads = router.thread_count()
    per_piece = -(-rows // (2 * threads))
    two_a_thread = [(start, min(start + per_piece, rows)) for start in range(0, rows, per_piece)]

    def run(task):
        def timed(pooled):  # the pool at every size: where does it start to pay?
            parallel.run(task, two_a_thread if pooled else [(0, rows)], pooled)
        return timed

    def layer_norm(pooled):
        schedule = router.RowSchedule(tuple(two_a_thread), True) if pooled else router.RowSchedule(((0, rows),))
        kernels.layer_norm_rows(x, weight, bias, 1e-5, schedule)

    return {"exp": run(exp), "relu": run(relu), "layer norm": layer_norm}


def sweep(repeat):
    print(f"{'elements':>10} {'pass':<11} {'single µs':>18} {'pooled µs':>18} {'pooled/single':>14}")
    for elements in [1 << k for k in range(13, 24)]:
        rows = max(1, elements // WIDTH)
        for name, fn in passes(rows).items():
            times = {True: [], False: []}
            for _ in range(3):
                fn(True), fn(False)
            for _ in range(repeat):
                for pooled in (False, True):
                    start = time.perf_counter()
                    fn(pooled)
                    times[pooled].append(time.perf_counter() - start)
            single, pooled = (sorted(times[p]) for p in (False, True))
            print(f"{rows * WIDTH:>10} {name:<11} {single[0] * 1e6:>8.1f} {statistics.median(single) * 1e6:>9.1f}"
                  f" {pooled[0] * 1e6:>8.1f} {statistics.median(pooled) * 1e6:>9.1f}"
                  f" {statistics.median(pooled) / statistics.median(single):>14.2f}", flush=True)


def _thread_ticks():
    """CPU ticks of each thread of this process."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks[tid] = int(fields[11]) + int(fields[12])
    return ticks


def blas_threads():
    """For GEMMs of growing m·n·k: do OpenBLAS's other threads spend CPU time (more than one thread)?"""
    main = str(threading.get_native_id())
    rng = np.random.default_rng(0)
    for m, n, k in [(64, 64, 64), (128, 128, 32), (64, 512, 16), (16, 512, 64), (128, 128, 64), (32, 512, 64),
                    (512, 512, 64)]:
        a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
        a @ b
        time.sleep(0.3)  # let OpenBLAS's threads go idle
        before, start = _thread_ticks(), time.perf_counter()
        while time.perf_counter() - start < 0.5:
            a @ b
        after = _thread_ticks()
        others = sum(after[t] - before.get(t, 0) for t in after if t != main)
        print(f"m·n·k = {m * n * k:>9,} ({m}×{k} @ {k}×{n}): other threads' CPU ticks {others}"
              f" -> {'more than one thread' if others > 2 else 'one thread'}")


def after_blas(repeat):
    """A pooled pass over 4M elements right after a 2-threaded BLAS call, against the same pass alone."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512), dtype=np.float32)
    x = rng.standard_normal((8192, WIDTH), dtype=np.float32)
    out = np.empty_like(x)

    def exp(start, stop):
        np.exp(x[start:stop], out=out[start:stop])

    ranges = router.pieces(x.shape[0], WIDTH)
    times = {"alone": [], "after BLAS": []}
    for _ in range(repeat):
        for name in times:
            if name == "after BLAS":
                a @ a  # 512³: OpenBLAS wakes its threads; they spin for OPENBLAS_THREAD_TIMEOUT afterwards
            else:
                time.sleep(0.01)  # OpenBLAS's threads have gone to sleep by now
            start = time.perf_counter()
            parallel.run(exp, ranges, True)
            times[name].append(time.perf_counter() - start)
    timeout = os.environ.get("OPENBLAS_THREAD_TIMEOUT", "unset")
    for name, t in times.items():
        print(f"OPENBLAS_THREAD_TIMEOUT={timeout}: pooled exp over 4M elements {name}: "
              f"min {min(t) * 1e3:.2f} ms, median {statistics.median(t) * 1e3:.2f} ms")


def _gate(grad, slope):  # kernels.gelu_backward_rows's product, for pieces of rows
    grad *= slope


def after_gemm(repeat):
    """``kernels.bias_relu`` and ``kernels.bias_gelu`` on ``(rows, 1536)`` right after the GEMM that makes
    their input, as a feed-forward block runs them, with the pool (``pool_min_elements=0``) and without; and
    backward's GELU gate, ``∂Z = ∂A ∘ gelu'(Z)``, one product in place (``kernels.gelu_backward_rows`` runs it
    on one thread: here also cut into the pool's pieces, to compare).
    After a two-thread GEMM, OpenBLAS's second thread spins for a while on the other core, and a pooled
    pass shares that core with it: the pool pays from a larger size than in the sweep above."""
    rng = np.random.default_rng(0)
    width, inner = 1536, 384
    print(f"{'elements':>10} {'pass':<11} {'one thread ms':>14} {'pooled ms':>10} {'pooled/one':>11}")
    for rows in (128, 200, 300, 400, 600, 800, 1024, 2048):
        z = rng.standard_normal((rows, width), dtype=np.float32)
        bias = rng.standard_normal(width, dtype=np.float32)
        a = rng.standard_normal((rows, inner), dtype=np.float32)
        w = rng.standard_normal((width, inner), dtype=np.float32)
        passes = {"bias+relu": lambda x, b: kernels.bias_relu(x, b, router.elementwise_schedule(x)),
                  "bias+gelu": lambda x, b: kernels.bias_gelu(x, b, "none", router.gelu_schedule(x)),
                  "gelu gate": lambda x, b, slope=z: kernels._by_rows(router.elementwise_schedule(x), _gate,
                                                                      (x, slope))}
        for name, step in passes.items():
            times = {False: [], True: []}
            for _ in range(repeat):
                for pooled in (False, True):
                    with tuning.tuned(pool_min_elements=0 if pooled else 1 << 62):
                        x = z.copy()
                        a @ w.T  # the GEMM before the pass (its result is not used)
                        start = time.perf_counter()
                        step(x, bias)
                        times[pooled].append(time.perf_counter() - start)
            one, pooled = (statistics.median(times[p]) for p in (False, True))
            print(f"{rows * width:>10} {name:<11} {one * 1e3:>14.2f} {pooled * 1e3:>10.2f} {pooled / one:>11.2f}",
                  flush=True)


SEQUENCE_GRID = ((2, (256, 1024)), (4, (256, 1024)), (8, (1, 8, 32, 128, 256)), (25, (1, 8, 16, 32, 64, 128)),
                 (64, (1, 8, 16, 32, 64)), (128, (1, 4, 8, 16, 32)))  # (l_max, the batch sizes timed)


def sequences(repeat, grid=SEQUENCE_GRID):
    """A BERT-style encoder layer (384 wide, 12 heads, exact GELU, post-norm; ``bert6``'s), compiled, in inference
    on the real tokens of a padded batch (``fast.encoder_on_real_tokens``) with attention sentence by sentence
    (``fast.attention.attention_by_sequences``) and on the padded batch with its padding mask; ``B`` sentences of
    lengths drawn from ``[⌈l_max/5⌉, l_max]`` (one of them ``l_max``); interleaved, medians."""
    import tinyattn.nn as nn
    import tinyattn.nn.functional as F

    ta.manual_seed(0)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(384, 12, 1536, dropout=0.0, activation="gelu",
                                                               layer_norm_eps=1e-12), 1).eval()
    encoder = ta.compile(encoder)  # its fused form: the real tokens alone (fast.encoder_on_real_tokens)
    rng = np.random.default_rng(0)
    print(f"{'l_max':>6} {'B':>5} {'tokens':>7} {'mean':>5} {'by sentence ms':>15} {'padded ms':>10} {'ratio':>7}")
    for longest, batches in grid:
        for B in batches:
            lengths = [longest] + list(rng.integers(-(-longest // 5), longest + 1, B - 1))
            x = ta.tensor(rng.standard_normal((B, longest, 384), dtype=np.float32))
            mask = F.padding_mask(lengths, longest)
            times = {True: [], False: []}
            previous = tuning.values.sequence_attention_min_length

            def step(by_sentence, longest=longest, x=x, mask=mask):
                tuning.values.sequence_attention_min_length = 0 if by_sentence else longest + 1
                with ta.no_grad():
                    encoder(x, mask=mask)

            try:
                for _ in range(2):
                    step(True), step(False)
                for i in range(repeat):
                    for by_sentence in ((True, False) if i % 2 else (False, True)):
                        start = time.perf_counter()
                        step(by_sentence)
                        times[by_sentence].append(time.perf_counter() - start)
            finally:
                tuning.values.sequence_attention_min_length = previous
            by_sentence, padded = (statistics.median(times[k]) * 1e3 for k in (True, False))
            print(f"{longest:>6} {B:>5} {sum(lengths):>7} {sum(lengths) / B:>5.1f} {by_sentence:>15.3f} {padded:>10.3f}"
                  f" {by_sentence / padded:>7.2f}", flush=True)


class _ExecutorPool:
    """``parallel._pool()``'s part played by a ``concurrent.futures.ThreadPoolExecutor`` of one thread fewer than the
    pool's count: a future per helper, each taking pieces from the pass's shared counter as the caller does, and the
    caller waiting on the futures (what ``--executor`` compares the pool with)."""

    def __init__(self, threads):
        import concurrent.futures

        self.threads = threads
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, threads - 1))

    def run(self, task, ranges):
        counter = itertools.count()  # (next() on it is atomic under the GIL)

        def work():
            for index in counter:
                if index >= len(ranges):
                    return
                task(*ranges[index])

        helpers = [self.executor.submit(work) for _ in range(min(len(ranges), self.threads) - 1)]
        work()
        for future in helpers:
            future.result()


def executor(repeat):
    """``fast.parallel``'s pool (its helpers idle on queues) against the same pool on a
    ``concurrent.futures.ThreadPoolExecutor`` (``_ExecutorPool``), on the passes the pool runs in a training step:
    attention's forward and backward over the medium batch (8 × 8 heads of 128 × 128, ``run.py``'s ``sdpa
    medium``, cut into batch slices by the router) and a LayerNorm forward over (8192, 512) rows; and on a pass of
    two empty pieces, which is the cost of the round trip alone. Interleaved, medians."""
    from tinyattn.fast import attention

    rng = np.random.default_rng(0)
    q, k, v, grad = (rng.standard_normal((8, 8, 128, 32), dtype=np.float32) for _ in range(4))
    schedule = router.attention_schedule(q, k, v)
    x = rng.standard_normal((8192, WIDTH), dtype=np.float32)
    weight, bias = np.ones(WIDTH, np.float32), np.zeros(WIDTH, np.float32)
    rows = router.row_schedule(x, *x.shape)
    assert schedule.pooled and rows.pooled, "the router does not pool these passes on this machine"

    def attention_step():
        out, arrays = attention.attention(q, k, v, None, None, False, 0.2, 0.0, schedule)
        attention.attention_backward(grad, arrays, schedule, 0.2)

    def nothing(start, stop):
        pass

    passes = {"attention fwd+bwd": (attention_step, repeat),
              "layer norm": (lambda: kernels.layer_norm_rows(x, weight, bias, 1e-5, rows), repeat),
              "two empty pieces": (lambda: parallel.run(nothing, [(0, 1), (1, 2)], True), 100 * repeat)}
    own, other = parallel._pool(), _ExecutorPool(router.thread_count())
    print(f"{'pass':<18} {'own pool ms':>12} {'executor ms':>12} {'executor/own':>13}")
    try:
        for name, (step, calls) in passes.items():
            times = {"own": [], "executor": []}
            for i in range(calls + 3):
                for which in (("own", "executor") if i % 2 else ("executor", "own")):
                    parallel._POOL = own if which == "own" else other
                    start = time.perf_counter()
                    step()
                    if i >= 3:  # (the first rounds warm up)
                        times[which].append(time.perf_counter() - start)
            mine, theirs = (statistics.median(times[k]) * 1e3 for k in ("own", "executor"))
            print(f"{name:<18} {mine:>12.4f} {theirs:>12.4f} {theirs / mine:>13.2f}", flush=True)
    finally:
        parallel._POOL = own
        other.executor.shutdown()


def products_on_pool(repeat):
    """What ``parallel.over_pool`` is for, and what it gains. First, attention's backward as the BERT-style
    medium layer runs it (``fast.attention.packed_attention_backward``, 8 × 8 heads of 128 × 128, pooled) alone and
    right after a two-thread GEMM of the layer's size (1024 × 256 times 256 × 1024), interleaved: OpenBLAS's second
    thread spins after the GEMM on the core the pool's thread needs. Then training steps (forward + backward, as
    ``run.py`` times them, compiled) with ``tuning.tuned(products_on_pool=...)`` on (the blocks' products over the
    pool, OpenBLAS on one thread) and off (OpenBLAS's threads), the two alternated step by step; medians."""
    import run

    from tinyattn.fast import attention

    rng = np.random.default_rng(0)
    B, H, L, D = 8, 8, 128, 32
    qkv = rng.standard_normal((3, B, H, L, D), dtype=np.float32)
    grad = rng.standard_normal((B, L, H * D), dtype=np.float32)
    scale = 1 / np.sqrt(D)
    schedule = router.attention_schedule(qkv[0], qkv[1], qkv[2])
    _, arrays = attention.packed_attention(qkv, None, None, False, scale, 0.0, schedule)
    a, b = rng.standard_normal((1024, 256), dtype=np.float32), rng.standard_normal((256, 1024), dtype=np.float32)
    times = {"alone": [], "after a GEMM": []}
    for i in range(repeat):
        for case in (("alone", "after a GEMM") if i % 2 else ("after a GEMM", "alone")):
            if case == "after a GEMM":
                a @ b
            start = time.perf_counter()
            attention.packed_attention_backward(grad, arrays, schedule, scale)
            times[case].append(time.perf_counter() - start)
    alone, after = (statistics.median(times[k]) * 1e3 for k in ("alone", "after a GEMM"))
    print(f"attention backward (8, 8, 128, 32): alone {alone:.3f} ms, right after a two-thread GEMM {after:.3f} ms "
          f"({after / alone:.2f} times)")
    print(f"{'case':>11} {'size':>7} {'on pool ms':>11} {'BLAS threads ms':>16} {'on ÷ off':>9}")
    for case, size in (("bert_layer", "medium"), ("encoder", "medium"), ("encoder", "large")):
        step = getattr(run, f"{case}_cases")(size, True)["tinyattn"]
        steps = max(10, repeat // (8 if size == "large" else 1))
        times = {True: [], False: []}
        for on in (True, False):
            with tuning.tuned(products_on_pool=on):
                step(), step()
        for i in range(steps):
            for on in ((True, False) if i % 2 else (False, True)):
                with tuning.tuned(products_on_pool=on):  # (the router reads it on every call: both ways)
                    start = time.perf_counter()
                    step()
                    times[on].append(time.perf_counter() - start)
        on, off = (statistics.median(times[k]) * 1e3 for k in (True, False))
        print(f"{case:>11} {size:>7} {on:>11.2f} {off:>16.2f} {on / off:>9.2f}", flush=True)


GELU_PIECES = (1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 19)


def gelu_pieces(repeat, sizes=((1024, 1024), (111, 1536), (2048, 2048)), piece_sizes=GELU_PIECES):
    """``kernels.bias_gelu`` with its slope (exact GELU, float32; a feed-forward block's forward while a graph is
    recorded) on ``(rows, F)``, by ``fast.tuning``'s ``gelu_piece_elements``: its pieces go over the pool where the
    router says so (the whole pass from ``pool_min_elements``). Interleaved, medians."""
    rng = np.random.default_rng(0)
    print(f"{'rows x F':>11} " + " ".join(f"{size:>9}" for size in piece_sizes) + "   (ms, by elements per piece)")
    for rows, width in sizes:
        z = rng.standard_normal((rows, width), dtype=np.float32)
        bias = rng.standard_normal(width, dtype=np.float32)
        times = {size: [] for size in piece_sizes}
        for _ in range(repeat):
            for size in piece_sizes:
                with tuning.tuned(gelu_piece_elements=size):
                    x = z.copy()
                    start = time.perf_counter()
                    kernels.bias_gelu(x, bias, "none", router.gelu_schedule(x))
                    times[size].append(time.perf_counter() - start)
        medians = " ".join(f"{statistics.median(times[size]) * 1e3:>9.3f}" for size in piece_sizes)
        print(f"{f'{rows} x {width}':>11} {medians}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--blas", action="store_true")
    parser.add_argument("--after-blas", action="store_true")
    parser.add_argument("--after-gemm", action="store_true")
    parser.add_argument("--sequences", action="store_true")
    parser.add_argument("--products-on-pool", action="store_true")
    parser.add_argument("--executor", action="store_true")
    parser.add_argument("--gelu", action="store_true")
    args = parser.parse_args()
    print(f"pool threads: {router.thread_count()}")
    if args.blas:
        blas_threads()
    elif args.after_gemm:
        after_gemm(min(args.repeat, 25))
    elif args.products_on_pool:
        products_on_pool(args.repeat)
    elif args.executor:
        executor(args.repeat)
    elif args.gelu:
        gelu_pieces(args.repeat)
    elif args.sequences:
        sequences(min(args.repeat, 20))
    elif args.after_blas:
        after_blas(args.repeat)
    else:
        sweep(args.repeat)


if __name__ == "__main__":
    main()
