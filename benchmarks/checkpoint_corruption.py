"""The checkpoint corruption campaign: one small checkpoint, damaged in every way of a few kinds, loaded.

    python benchmarks/checkpoint_corruption.py      # every truncation and every single-bit flip

A small checkpoint (a few arrays and the nested metadata a training run saves) is written with
``ta.save``; then damaged copies of it are loaded with ``ta.load``:

- truncated: cut at every length from 0 to its size - 1;
- flipped: every single bit of it flipped, one at a time;
- other files: empty, text, a foreign zip archive, a foreign ``.npy``.

Each load must either raise ``ta.CheckpointError`` naming the file, or, for a flip in bytes that
nothing reads (a zip timestamp, say), return exactly the saved structure. A partial or altered
result, or any other error, is a failure. Prints the counts and times; exit status 1 on a failure.
"""

import argparse
import collections
import io
import os
import sys
import tempfile
import time
import zipfile

import numpy as np

import tinyattn as ta


def sample_checkpoint():
    """A small checkpoint: arrays of three dtypes, a NumPy scalar, and nested plain values."""
    rng = np.random.default_rng(0)
    return {
        "model": {"linear.weight": rng.standard_normal((3, 4)).astype(np.float32), "linear.bias": np.arange(4)},
        "optimizer": {
            "state": {0: {"step": 3, "exp_avg": rng.standard_normal(4)}},
            "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "nesterov": False, "params": [0, 1]}],
        },
        "epoch": 2,
        "loss": np.float32(1.25),
        "note": "warm-up",
        "best": None,
    }


def same(loaded, saved):
    """True when ``loaded`` is exactly what ``ta.load`` returns for ``saved``: the same containers,
    keys (types and order), plain values, and arrays (type, dtype, shape and bytes)."""
    if isinstance(saved, (ta.Tensor, np.ndarray, np.generic)):
        saved = saved.numpy() if isinstance(saved, ta.Tensor) else saved
        return (
            type(loaded) is type(saved)
            and loaded.dtype == saved.dtype
            and loaded.shape == saved.shape
            and np.asarray(loaded).tobytes() == np.asarray(saved).tobytes()
        )
    if isinstance(saved, dict):
        return (
            type(loaded) is collections.OrderedDict
            and [(type(k), k) for k in loaded] == [(type(k), k) for k in saved]
            and all(same(loaded[k], v) for k, v in saved.items())
        )
    if isinstance(saved, (list, tuple)):
        return type(loaded) is type(saved) and len(loaded) == len(saved) and all(map(same, loaded, saved))
    if isinstance(saved, (float, complex)):  # bit for bit: NaN equals NaN, -0.0 differs from 0.0
        kind = np.float64 if isinstance(saved, float) else np.complex128
        return type(loaded) is type(saved) and kind(loaded).tobytes() == kind(saved).tobytes()
    return type(loaded) is type(saved) and loaded == saved


def outcome(path, saved):
    """``"detected"`` (``"detected, key named"`` when the error names the damaged array's keys),
    ``"identical"``, or what went wrong, for one ``ta.load(path)``."""
    try:
        loaded = ta.load(path)
    except ta.CheckpointError as error:
        if str(path) not in str(error):
            return f"error not naming the file: {error}"
        return "detected, key named" if "the array at [" in str(error) else "detected"
    except Exception as error:
        return f"{type(error).__name__} instead of CheckpointError: {error}"
    return "identical" if same(loaded, saved) else "altered result"


def truncations(data):
    for length in range(len(data)):
        yield f"truncated to {length} bytes", data[:length]


def flipped(data, offset, bit):
    damaged = bytearray(data)
    damaged[offset] ^= 1 << bit
    return bytes(damaged)


def flips(data):
    for offset in range(len(data)):
        for bit in range(8):
            yield f"bit {bit} of byte {offset} flipped", flipped(data, offset, bit)


def other_files():
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("readme.txt", "not a checkpoint")
    npy = io.BytesIO()
    np.save(npy, np.arange(10.0))
    return [
        ("empty file", b""),
        ("text file", b"epoch: 3\nloss: 1.25\n"),
        ("foreign zip", zipped.getvalue()),
        ("foreign .npy", npy.getvalue()),
    ]


def campaign(cases, path, saved):
    """Counts of each outcome over ``cases`` (label, bytes), and the failures' labels."""
    counts, failures = collections.Counter(), []
    for label, data in cases:
        with open(path, "wb") as file:
            file.write(data)
        result = outcome(path, saved)
        counts["tried"] += 1
        if result.startswith("detected"):
            counts["detected"] += 1
            counts["key named"] += result.endswith("key named")
        elif result == "identical":
            counts["identical"] += 1
        else:
            failures.append(f"{label}: {result}")
    return counts, failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    saved = sample_checkpoint()
    all_failures = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "damaged-checkpoint.npz")
        ta.save(saved, path)
        with open(path, "rb") as file:
            data = file.read()
        assert same(ta.load(path), saved)
        print(f"checkpoint: {len(data)} bytes ({len(data) * 8} bits)")
        kinds = [("truncated", truncations(data)), ("bit flips", flips(data)), ("other files", other_files())]
        for name, cases in kinds:
            start = time.perf_counter()
            counts, failures = campaign(cases, path, saved)
            seconds = time.perf_counter() - start
            print(
                f"{name:12} tried {counts['tried']:6}  detected (named the file) {counts['detected']:6} "
                f"(of which named a key {counts['key named']:5})  loaded identical {counts['identical']:5}  "
                f"failed {len(failures):3}  {seconds:5.1f} s"
            )
            all_failures += failures
    for failure in all_failures[:50]:
        print("FAILED", failure)
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
