"""Does each speed mechanism pay? Each one against its absence, in one process, paired.

    python benchmarks/ablate.py                          # every mechanism, every case of benchmarks/run.py
    python benchmarks/ablate.py --mechanisms pool --cases encoder,bert_layer --sizes medium,large --rounds 30

For every case of ``benchmarks/run.py`` (its own step functions, on the compiled model: ``ta.compile``) and every
mechanism below, the step runs in alternated blocks with the mechanism on (as the library ships) and off, round
after round; each round gives one ratio, on ÷ off, and the row reports their median and quartiles. The control
(``a/a``) runs the shipped configuration against itself the same way: a mechanism whose ratio stays within the
control's spread changed nothing measurable. A mechanism that gains less than 5% on every row (ratio above 0.95)
does not pay for its code.

Mechanisms (each switched off in this process only, for the timed blocks):

- ``gradient_reuse``: the engine's backward walk hands a leaf the gradient it alone holds, uncopied, as PyTorch's
  ``AccumulateGrad`` does (off: every first gradient copied: ``_accumulate_leaf`` wrapped);
- ``buffers``: ``fast.buffers`` hands out the fused kernels' large arrays from memory it keeps (off: ``xp.empty``);
- ``pool``: large fused passes and products spread over a thread pool (off: ``products_on_pool=False`` and an
  unreachable ``pool_min_elements``);
- ``blocked``: attention over 513 keys or more goes a block of keys at a time (off: an unreachable threshold);
- ``by_sequences``: inference on a padded batch attends sentence by sentence (off: an unreachable threshold).

OpenBLAS's idle threads busy-wait: ``OPENBLAS_THREAD_TIMEOUT`` is set low before NumPy loads, as in ``run.py``.
"""

import argparse
import contextlib
import os
import platform
import shlex
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402  (after OPENBLAS_THREAD_TIMEOUT)
import run  # noqa: E402  (benchmarks/run.py: the cases)

UNREACHABLE = 1 << 62


@contextlib.contextmanager
def without_buffers():
    from tinyattn.fast import buffers

    kept = buffers.empty, buffers.empty_like
    buffers.empty = lambda xp, shape, dtype: xp.empty(shape, dtype=dtype)
    buffers.empty_like = lambda xp, x, dtype=None: xp.empty_like(x, dtype=dtype)
    try:
        yield
    finally:
        buffers.empty, buffers.empty_like = kept


@contextlib.contextmanager
def without_gradient_reuse():
    from tinyattn import engine
    kept = engine._accumulate_leaf
    engine._accumulate_leaf = lambda t, grad, unshared=False: kept(t, grad, False)
    try:
        yield
    finally:
        engine._accumulate_leaf = kept


def tuned(**values):
    from tinyattn.fast import tuning

    return lambda: tuning.tuned(**values)


MECHANISMS = {
    "a/a": contextlib.nullcontext,
    "gradient_reuse": without_gradient_reuse,
    "buffers": without_buffers,
    "pool": tuned(products_on_pool=False, pool_min_elements=UNREACHABLE),
    "blocked": tuned(blocked_attention_min_keys=UNREACHABLE),
    "by_sequences": tuned(sequence_attention_min_length=float(UNREACHABLE)),
}

CASES = {"sdpa": lambda size, backward: run.attention_cases(size, backward, False),
         "mha": lambda size, backward: run.attention_cases(size, backward, True),
         "encoder": run.encoder_cases, "bert_layer": run.bert_layer_cases,
         "bert6": lambda size, backward: run.bert6_cases(size, backward),
         "train": lambda size, backward: run.train_cases(size, backward)}
PASSES = {"sdpa": (False, True), "mha": (False, True), "encoder": (False, True), "bert_layer": (False, True),
          "bert6": (False,), "train": (True,)}
SIZES = {"bert6": ("batch8",), "train": ("example",)}


def timed(step, calls):
    start = time.perf_counter()
    for _ in range(calls):
        step()
    return (time.perf_counter() - start) / calls


def paired(step, switch_off, rounds, calls):
    """Median and quartiles of (time on ÷ time off) over ``rounds`` rounds of blocks on, off, off, on."""
    for _ in range(2):
        step()
        with switch_off():
            step()
    ratios = []
    for r in range(rounds):
        order = (True, False, False, True) if r % 2 else (False, True, True, False)
        on = off = 0.0
        for is_on in order:
            if is_on:
                on += timed(step, calls)
            else:
                with switch_off():
                    off += timed(step, calls)
        ratios.append(on / off)
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return median, q1, q3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--sizes", default="small,medium,large")
    parser.add_argument("--mechanisms", default=",".join(MECHANISMS))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=0.05, help="about this long per block")
    parser.add_argument("--markdown", metavar="PATH", help="write the table here too")
    args = parser.parse_args()
    mechanisms = args.mechanisms.split(",")
    header = "| case | size | pass | " + " | ".join(f"{m} on ÷ off" for m in mechanisms) + " |"
    lines = [header, "|" + "---|" * (3 + len(mechanisms))]
    print(header, flush=True)
    for case in args.cases.split(","):
        for size in SIZES.get(case, args.sizes.split(",")):
            for backward in PASSES[case]:
                step = CASES[case](size, backward)["tinyattn"]
                calls = max(1, round(args.seconds / timed(step, 3)))
                cells = []
                for mechanism in mechanisms:
                    median, q1, q3 = paired(step, MECHANISMS[mechanism], args.rounds, calls)
                    cells.append(f"{median:.3f} ({q1:.3f}–{q3:.3f})")
                name = "inference" if case == "bert6" else "step" if case == "train" else (
                    "fwd+bwd" if backward else "fwd")
                line = f"| {case} | {size} | {name} | " + " | ".join(cells) + " |"
                lines.append(line)
                print(line, flush=True)
    if args.markdown:
        command = "python benchmarks/ablate.py " + shlex.join(sys.argv[1:])
        header = [f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
                  f"Machine: {run._machine()}; Python {platform.python_version()}, NumPy {np.__version__}.",
                  f"Each cell: the median (and quartiles) over {args.rounds} rounds of the step's time with the "
                  "mechanism on ÷ off, both in this process; below 1, the mechanism pays.", ""]
        with open(args.markdown, "w") as f:
            f.write("\n".join(header + lines) + "\n")


if __name__ == "__main__":
    main()
