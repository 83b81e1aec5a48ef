"""Attention, one step at a time, on the sentence "time flies like an arrow".

Nothing is trained: the five words get random embeddings, and we follow the numbers.

1. **One head.** Project the embeddings ``x (L, E)`` to queries, keys and values, compare
   every query with every key, turn each row of scores into weights with a softmax (each row
   sums to 1), and mix the values with those weights:

       Q, K, V = x W_qᵀ, x W_kᵀ, x W_vᵀ                   (L, d)
       scores  = Q Kᵀ / √d                                (L, L)
       weights = softmax(scores) along each row           (L, L)
       output  = weights V                                (L, d)

2. **Many heads, the naive way.** ``H`` independent heads, each with its own slice of the
   projections (``head_dim = E / H`` rows of each matrix); concatenate their outputs and
   mix them with one more linear layer:

       head_h    = Attention(x W_q,hᵀ, x W_k,hᵀ, x W_v,hᵀ)  (L, head_dim)
       MultiHead = Concat(head_0, …, head_{H-1}) W_oᵀ       (L, E)

3. **Many heads, the batched way.** One projection for all heads, reshaped so that the
   heads become a batch dimension — ``(B, L, E) -> (B, L, H, head_dim) -> (B, H, L, head_dim)``
   — one call of ``F.scaled_dot_product_attention`` for all of them, and back.

4. **The library.** ``nn.MultiHeadAttention`` with the same weights computes the same thing,
   and so does PyTorch's ``torch.nn.MultiheadAttention`` (when PyTorch is installed), its
   weights packed by ``ta.interop.to_torch``.

5. **Compiled.** ``ta.compile(mha)`` swaps in the module's fused form (the three projections as
   one GEMM, attention and the merge of the heads as one node), and
   ``ta.compile(F.scaled_dot_product_attention)`` the function's; both compute the same.

Nothing before step 5 is compiled, so each step runs the reference definition in ``tinyattn/nn/``
that a debugger would step through; ``ta.explain`` prints what runs, before and after compiling.
The heatmaps (one PNG per head, plus the single head of step 1) land in ``--out``; the last line
gives the largest difference between any two of the ways above.

    python examples/attention_walkthrough.py
"""

import argparse
import math
from pathlib import Path

import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import viz

SENTENCE = "time flies like an arrow".split()


def show(name, t):
    """Print a tensor's name, shape and values (batch dimension of 1 dropped)."""
    values = t.numpy()
    print(f"{name} {tuple(t.shape)}")
    print(np.array2string(values[0] if values.shape[0] == 1 else values, precision=3, suppress_small=True))


def max_difference(a, b):
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max())


def save_weights(weights, title, path):
    """``viz.plot_attention`` of ``weights (L, L)``, captioned: nothing here is trained."""
    figure = viz.plot_attention(weights, SENTENCE, SENTENCE, title=title)
    figure.supxlabel("Untrained: random embeddings and projections, so which word looks at which\n"
                     "says nothing about the words. What holds is the shape: each row sums to 1.", fontsize=8)
    figure.savefig(path, dpi=120)


def one_head(x, embed_dim, head_dim):
    """Step 1: a single attention head with fresh random projections, every intermediate printed."""
    W_q, W_k, W_v = (nn.Linear(embed_dim, head_dim, bias=False).to(x.device) for _ in range(3))
    Q, K, V = W_q(x), W_k(x), W_v(x)  # each (1, L, d)
    show("Q = x W_qᵀ", Q)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(head_dim)  # (1, L, L)
    show("scores = Q Kᵀ / √d", scores)
    weights = F.softmax(scores, dim=-1)  # (1, L, L)
    show("weights = softmax(scores)", weights)
    print("each row of the weights sums to", weights.sum(dim=-1).numpy()[0].round(6))
    output = weights @ V  # (1, L, d)
    show("output = weights V", output)
    library_output, library_weights = F.scaled_dot_product_attention(Q, K, V)
    difference = max(max_difference(output.numpy(), library_output.numpy()),
                     max_difference(weights.numpy(), library_weights.numpy()))
    print(f"F.scaled_dot_product_attention(Q, K, V) agrees: max difference {difference:.1e}")
    attention = ta.compile(F.scaled_dot_product_attention)  # its fused form: one node, the weights not kept
    fused_output, _ = attention(Q, K, V, need_weights=False)
    fused_difference = max_difference(output.numpy(), fused_output.numpy())
    print(f"ta.compile(F.scaled_dot_product_attention)(Q, K, V, need_weights=False) agrees: "
          f"max difference {fused_difference:.1e}\n")
    return weights, max(difference, fused_difference)


def naive_heads(mha, x):
    """Step 2: a Python list of single heads, each on its own rows of the projections; concat; out_proj."""
    heads = []
    for h in range(mha.num_heads):
        rows = slice(h * mha.head_dim, (h + 1) * mha.head_dim)
        q = F.linear(x, mha.q_proj.weight[rows], mha.q_proj.bias[rows])  # (1, L, head_dim)
        k = F.linear(x, mha.k_proj.weight[rows], mha.k_proj.bias[rows])  # (1, L, head_dim)
        v = F.linear(x, mha.v_proj.weight[rows], mha.v_proj.bias[rows])  # (1, L, head_dim)
        weights = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(mha.head_dim), dim=-1)  # (1, L, L)
        heads.append(weights @ v)  # (1, L, head_dim)
        print(f"head {h}: uses rows {rows.start}:{rows.stop} of each projection -> output {tuple(heads[-1].shape)}")
    concatenated = ta.cat(heads, dim=-1)  # (1, L, E)
    print(f"concatenated {tuple(concatenated.shape)} -> out_proj -> {(1, x.shape[1], mha.out_proj.out_features)}")
    return mha.out_proj(concatenated)  # (1, L, E)


def batched_heads(mha, x):
    """Step 3: project once, split the heads into a batch dimension, attend, merge them back."""
    B, L, E = x.shape
    H, head_dim = mha.num_heads, mha.head_dim

    def split(t):
        return t.reshape(B, L, H, head_dim).transpose(1, 2)  # (B, L, E) -> (B, H, L, head_dim)

    q, k, v = split(mha.q_proj(x)), split(mha.k_proj(x)), split(mha.v_proj(x))
    print(f"split heads: (B, L, E) = {(B, L, E)} -> (B, H, L, head_dim) = {tuple(q.shape)}")
    output, weights = F.scaled_dot_product_attention(q, k, v)  # (B, H, L, head_dim), (B, H, L, L)
    merged = output.transpose(1, 2).reshape(B, L, E)  # (B, H, L, head_dim) -> (B, L, E)
    print(f"merge heads: {tuple(output.shape)} -> {tuple(merged.shape)}")
    return mha.out_proj(merged), weights


def compare_with_pytorch(mha, x, output, weights):
    """Step 4b: PyTorch's nn.MultiheadAttention with our weights; None when PyTorch is missing."""
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: skipping the comparison with torch.nn.MultiheadAttention")
        return None
    E, H = mha.q_proj.in_features, mha.num_heads
    reference = torch.nn.MultiheadAttention(E, H, batch_first=True)
    state = ta.interop.to_torch(mha.state_dict())  # q/k/v_proj -> in_proj_weight, in_proj_bias
    reference.load_state_dict({name: torch.from_numpy(array) for name, array in state.items()})
    with torch.no_grad():
        torch_x = torch.from_numpy(x.numpy())
        torch_output, torch_weights = reference(torch_x, torch_x, torch_x, average_attn_weights=False)
    difference = max(max_difference(output.numpy(), torch_output.numpy()),
                     max_difference(weights.numpy(), torch_weights.numpy()))
    print(f"torch.nn.MultiheadAttention with the same weights: max difference {difference:.1e}")
    return difference


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embed-dim", type=int, default=8, help="E, the embedding width")
    parser.add_argument("--num-heads", type=int, default=2, help="H; E must be a multiple of it")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/attention_walkthrough", help="folder for the PNG pictures")
    parser.add_argument("--quick", action="store_true", help="accepted for symmetry with the other examples; "
                                                             "the walk-through is always quick")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)
    E, H = args.embed_dim, args.num_heads

    embedding = nn.Embedding(len(SENTENCE), E).to(args.device)
    x = embedding(ta.arange(len(SENTENCE), device=args.device)).unsqueeze(0)  # (B=1, L=5, E)
    print(f"sentence: {SENTENCE}")
    show("x = random embeddings", x)
    print()

    with ta.no_grad():
        print("--- 1. one head ---")
        single_weights, difference_single = one_head(x, E, E // H)
        save_weights(single_weights[0], "one head: softmax(Q Kᵀ / √d)", out / "single_head.png")

        mha = nn.MultiHeadAttention(E, H).to(args.device)
        print(f"--- 2. {H} heads, the naive way (head_dim = {E} / {H} = {mha.head_dim}) ---")
        naive = naive_heads(mha, x)
        print(f"\n--- 3. {H} heads, the batched way ---")
        batched, batched_weights = batched_heads(mha, x)
        print("\n--- 4. the library ---")
        print("what nn.MultiHeadAttention runs (ta.explain):")
        ta.explain(mha, x)
        library, library_weights = mha(x)  # (1, L, E), (1, H, L, L)
        print("\n--- 5. compiled ---")
        compiled = ta.compile(mha)  # its fused form, the same parameters
        print("what ta.compile(mha) runs without the weights (ta.explain):")
        ta.explain(compiled, x, need_weights=False)
        fused, _ = compiled(x, need_weights=False)  # (1, L, E)
        differences = {
            "naive vs batched": max_difference(naive.numpy(), batched.numpy()),
            "batched vs nn.MultiHeadAttention": max_difference(batched.numpy(), library.numpy()),
            "weights, batched vs nn.MultiHeadAttention": max_difference(
                batched_weights.numpy(), library_weights.numpy()),
            "nn.MultiHeadAttention vs ta.compile(mha)": max_difference(library.numpy(), fused.numpy()),
        }
        for name, difference in differences.items():
            print(f"{name}: max difference {difference:.1e}")
        torch_difference = compare_with_pytorch(mha, x, library, library_weights)
        show("nn.MultiHeadAttention output", library)

    for h in range(H):
        save_weights(library_weights[0, h], f"head {h} of {H}", out / f"head_{h}.png")
    compared = [difference_single, *differences.values()]
    if torch_difference is not None:
        compared.append(torch_difference)
    worst = max(compared)
    print(f"pictures in {out}/")
    print(f"final max difference: {worst:.3e}")


if __name__ == "__main__":
    main()
