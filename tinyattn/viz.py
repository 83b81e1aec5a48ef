"""Pictures and diagnostics: attention heatmaps, loss curves and the autograd graph.

``plot_attention`` and ``plot_loss`` draw with matplotlib's Agg renderer (no window, no
global pyplot state: each call builds its own ``Figure``), return the figure, and save a
PNG when given a ``path``. matplotlib is imported inside them only, so the library works
without it. ``to_dot`` writes a tensor's autograd graph as Graphviz DOT text, which needs
nothing; ``render_dot`` hands that text to Graphviz's ``dot`` program.

>>> import tinyattn as ta
>>> x = ta.tensor([1.0, 2.0], requires_grad=True)
>>> "Mul" in to_dot((x * x).sum())
True
"""

import shutil
import subprocess

import numpy as np

from . import backend
from .engine import Tensor


def _figure(width, height):
    """A matplotlib ``Figure`` on the Agg canvas (imported here, with a clear error if missing)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            "tinyattn.viz draws with matplotlib, which is not installed: "
            "pip install matplotlib (or pip install 'tinyattn[examples]')"
        ) from error
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _host_array(values, name):
    """A tensor, a backend array (NumPy or CuPy) or nested lists, as a float NumPy array."""
    if isinstance(values, Tensor):
        return values.numpy().astype(np.float64)
    if backend.is_array(values):
        return backend.to_numpy(values).astype(np.float64)
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        kind = type(values).__name__
        raise TypeError(f"{name}: expected a tensor, an array or a list of numbers, got {kind}") from error


def _check_tokens(tokens, size, which, weights_shape, caller="plot_attention"):
    """``tokens`` as a list of labels of length ``size`` (``None``: the positions 0 … size-1)."""
    if tokens is None:
        return [str(i) for i in range(size)]
    tokens = [str(t) for t in tokens]
    if len(tokens) != size:
        axis = "Lq (rows)" if which == "query" else "Lk (columns)"
        raise ValueError(
            f"{caller}: {len(tokens)} {which}_tokens for weights of shape {weights_shape}, "
            f"whose {axis} is {size}"
        )
    return tokens


def plot_attention(weights, query_tokens=None, key_tokens=None, path=None, title=None):
    """Heatmap of attention weights: queries down the rows, keys along the columns.

    ``weights``: ``(Lq, Lk)`` for one head or ``(H, Lq, Lk)`` for ``H`` heads (one panel
    each, sharing one colour scale); a tensor (on any device) or an array. Take one batch
    element of a ``(B, H, Lq, Lk)`` result first: ``weights[0]``. ``query_tokens`` and
    ``key_tokens`` label the axes (their lengths must be ``Lq`` and ``Lk``). Returns the
    matplotlib ``Figure``; writes it as a PNG to ``path`` when given.

    >>> import tinyattn as ta
    >>> w = ta.tensor([[[0.9, 0.1], [0.3, 0.7]], [[0.5, 0.5], [0.0, 1.0]]])  # (H=2, Lq=2, Lk=2)
    >>> figure = plot_attention(w, ["a", "b"], ["c", "d"])
    >>> len([axes for axes in figure.axes if axes.images])                  # one panel per head
    2
    """
    array = _host_array(weights, "plot_attention")
    shape = tuple(array.shape)
    if array.ndim == 2:
        array = array[None]  # (1, Lq, Lk)
    if array.ndim != 3:
        raise ValueError(
            f"plot_attention: weights must be (Lq, Lk) or (H, Lq, Lk), got shape {shape}; "
            "for a batch (B, H, Lq, Lk) pass one element, weights[b]"
        )
    num_heads, Lq, Lk = array.shape
    query_tokens = _check_tokens(query_tokens, Lq, "query", shape)
    key_tokens = _check_tokens(key_tokens, Lk, "key", shape)

    columns = min(num_heads, 4)
    rows = -(-num_heads // columns)
    cell = 0.32 if max(Lq, Lk) > 12 else 0.45
    longest = max(len(token) for token in key_tokens)  # the rotated key labels need room below
    panel_w, panel_h = max(2.2, 1.2 + cell * Lk), max(2.2, 1.0 + cell * Lq + 0.07 * longest)
    figure = _figure(panel_w * columns + 0.8, panel_h * rows + (0.4 if title else 0.0))
    grid = figure.subplots(rows, columns, squeeze=False)
    vmax = max(float(array.max()), 1e-12)
    for head in range(rows * columns):
        axes = grid[head // columns][head % columns]
        if head >= num_heads:
            axes.set_axis_off()
            continue
        image = axes.imshow(array[head], cmap="viridis", vmin=0.0, vmax=vmax)
        axes.set_xticks(range(Lk), key_tokens, rotation=90, fontsize=8)
        axes.set_yticks(range(Lq), query_tokens, fontsize=8)
        axes.set_xlabel("key")
        axes.set_ylabel("query")
        if num_heads > 1:
            axes.set_title(f"head {head}", fontsize=9)
    figure.colorbar(image, ax=grid.ravel().tolist(), shrink=0.8, label="weight")
    if title:
        figure.suptitle(title)
    if path is not None:
        figure.savefig(path, dpi=120)
    return figure


def plot_loss(losses, path=None, title="training loss", xlabel="step"):
    """Loss curve: each recorded value, and a moving average when there are many.

    ``losses``: a sequence of numbers (one per step). The y axis turns logarithmic when
    the values span more than a factor of 20. Returns the ``Figure``; saves a PNG to
    ``path`` when given.

    >>> figure = plot_loss([2.3, 1.1, 0.6, 0.4])
    >>> figure.axes[0].get_ylabel()
    'loss'
    """
    values = _host_array(losses, "plot_loss").ravel()
    if values.size == 0:
        raise ValueError("plot_loss: no losses to plot (got an empty sequence)")
    figure = _figure(6.0, 3.6)
    axes = figure.subplots()
    steps = np.arange(values.size)
    axes.plot(steps, values, color="tab:blue", alpha=0.35 if values.size >= 50 else 1.0, lw=1, label="loss")
    if values.size >= 50:
        window = max(values.size // 50, 5)
        smooth = np.convolve(values, np.ones(window) / window, mode="valid")
        axes.plot(steps[window - 1:], smooth, color="tab:blue", lw=2, label=f"mean of {window}")
        axes.legend()
    positive = values[values > 0]
    if positive.size == values.size and positive.max() > 20 * positive.min():
        axes.set_yscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("loss")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    if path is not None:
        figure.savefig(path, dpi=120)
    return figure


def _quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(tensor, names=None):
    """The autograd graph below ``tensor`` as Graphviz DOT text.

    Boxes are tensors (shape and dtype; leaves that require grad are filled, constants
    grey), ellipses are the operations that made them. Edges point the way ``backward()``
    walks: from a tensor to the operation that produced it, from an operation to its
    inputs. ``names`` (e.g. ``dict(model.named_parameters())``) labels the tensors it holds.
    The graph is walked without recursion, so a very deep one is fine; after a backward
    without ``retain_graph`` the operations' saved arrays are gone but the graph is still drawn.

    >>> import tinyattn as ta
    >>> w = ta.tensor([1.0, 2.0], requires_grad=True)
    >>> print(to_dot((w * 3).sum(), names={"w": w}))
    digraph autograd {
      rankdir=TB;
      node [fontname="Helvetica", fontsize=10];
      t0 [label="()\\nfloat32", shape=box, style="filled,bold", fillcolor="#f4c7a1"];
      f0 [label="Sum", shape=ellipse];
      t0 -> f0;
      t1 [label="(2,)\\nfloat32", shape=box];
      f0 -> t1;
      f1 [label="Mul", shape=ellipse];
      t1 -> f1;
      t2 [label="w\\n(2,)\\nfloat32", shape=box, style=filled, fillcolor="#a9d4f5"];
      f1 -> t2;
      t3 [label="()\\nfloat32", shape=box, style=filled, fillcolor="#e6e6e6"];
      f1 -> t3;
    }
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot: expected a tensor, got {type(tensor).__name__}")
    label_of = {id(t): name for name, t in (names or {}).items()}
    lines = ["digraph autograd {", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    tensor_ids, function_ids = {}, {}

    def tensor_node(t):
        """The node id of ``t``, emitting its line the first time it is met."""
        key = id(t)
        if key in tensor_ids:
            return tensor_ids[key], False
        node = tensor_ids[key] = f"t{len(tensor_ids)}"
        label = f"{tuple(t.shape)}\n{t.dtype}"
        if key in label_of:
            label = f"{label_of[key]}\n{label}"
        if t is tensor:
            style = ', style="filled,bold", fillcolor="#f4c7a1"'
        elif t._ctx is None and t.requires_grad:
            style = ', style=filled, fillcolor="#a9d4f5"'
        elif t._ctx is None:
            style = ', style=filled, fillcolor="#e6e6e6"'
        else:
            style = ""
        lines.append(f"  {node} [label={_quote(label)}, shape=box{style}];")
        return node, True

    stack = [tensor]
    tensor_node(tensor)
    while stack:
        t = stack.pop()
        fn = t._ctx
        if fn is None:
            continue
        first_visit = id(fn) not in function_ids
        if first_visit:
            function_ids[id(fn)] = f"f{len(function_ids)}"
            lines.append(f"  {function_ids[id(fn)]} [label={_quote(type(fn).__name__)}, shape=ellipse];")
        lines.append(f"  {tensor_ids[id(t)]} -> {function_ids[id(fn)]};")
        if not first_visit:
            continue
        new_parents = []
        for parent in fn.parents:
            node, is_new = tensor_node(parent)
            lines.append(f"  {function_ids[id(fn)]} -> {node};")
            if is_new:
                new_parents.append(parent)
        stack.extend(reversed(new_parents))  # depth first, inputs in order
    lines.append("}")
    return "\n".join(lines)


def render_dot(tensor, path, names=None):
    """Draw ``to_dot(tensor, names)`` to ``path`` with Graphviz (format from the suffix: png, svg, pdf).

    Needs the ``dot`` program on the PATH (``apt-get install graphviz``, ``brew install
    graphviz`` or ``conda install graphviz``); without it a ``RuntimeError`` says so, and
    ``to_dot`` still gives the text to render elsewhere. Returns ``path``.

    The example holds on a machine with Graphviz and on one without:

    >>> import os, tempfile
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
    >>> y = (x * x).sum()
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "graph.svg")
    ...     try:                               # Graphviz installed: the picture, written at the path returned
    ...         ok = render_dot(y, path) == path and os.path.getsize(path) > 0
    ...     except RuntimeError as error:      # no `dot` on the PATH: an error that says so
    ...         ok = "`dot` program is not on the PATH" in str(error)
    >>> ok
    True
    """
    executable = shutil.which("dot")
    if executable is None:
        raise RuntimeError(
            "render_dot: Graphviz's `dot` program is not on the PATH; install Graphviz "
            "(apt-get install graphviz, brew install graphviz or conda install graphviz), "
            "or write to_dot(tensor) to a .dot file and render it elsewhere"
        )
    path = str(path)
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if suffix not in ("png", "svg", "pdf"):
        raise ValueError(f"render_dot: path {path!r} must end in .png, .svg or .pdf")
    result = subprocess.run(
        [executable, f"-T{suffix}", "-o", path], input=to_dot(tensor, names), text=True, capture_output=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"render_dot: dot exited with status {result.returncode}: {result.stderr.strip()}")
    return path


_HEAD_VIEW_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 16px; color: #222; }
#controls { margin-bottom: 10px; }
.head-toggle { display: inline-block; width: 18px; height: 18px; margin: 0 2px; cursor: pointer;
               border: 2px solid #444; vertical-align: middle; }
.head-toggle.off { opacity: 0.15; }
text.token { font-size: 14px; cursor: pointer; dominant-baseline: middle; }
text.token.active { font-weight: bold; }
</style></head>
<body>
<h3>__TITLE__</h3>
<div id="controls">layer <select id="layer"></select>
 &nbsp; heads <span id="heads"></span>
 <span style="color:#666"> &nbsp; (hover a __QUERY__ token on the left; click a colour to toggle a head)</span></div>
<svg id="view" xmlns="http://www.w3.org/2000/svg"></svg>
<script>
"use strict";
const DATA = __DATA__;
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];
const ROW = 22, LEFT = 10, WIDTH = 200, GAP = 260, TOP = 20;
const svg = document.getElementById("view");
const select = document.getElementById("layer");
const heads = document.getElementById("heads");
const state = {layer: 0, query: null, enabled: []};
const nH = DATA.layers[0].weights.length;
for (let h = 0; h < nH; h++) state.enabled.push(true);

DATA.layers.forEach((layer, i) => {
  const option = document.createElement("option");
  option.value = i; option.textContent = layer.name; select.appendChild(option);
});
for (let h = 0; h < nH; h++) {
  const box = document.createElement("span");
  box.className = "head-toggle"; box.id = "head-" + h; box.title = "head " + h;
  box.style.background = COLORS[h % COLORS.length];
  box.addEventListener("click", () => { state.enabled[h] = !state.enabled[h];
                                         box.classList.toggle("off", !state.enabled[h]); draw(); });
  heads.appendChild(box);
}
select.addEventListener("change", () => { state.layer = Number(select.value); draw(); });

function make(tag, attributes, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function draw() {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const rows = Math.max(DATA.query_tokens.length, DATA.key_tokens.length);
  svg.setAttribute("width", LEFT + 2 * WIDTH + GAP);
  svg.setAttribute("height", TOP + rows * ROW + 10);
  const weights = DATA.layers[state.layer].weights;  // (H, Lq, Lk)
  const spread = Math.min(1.5, 14 / nH);  // each head's lines a little apart, so that the colours show
  const lines = make("g", {id: "lines"});
  svg.appendChild(lines);
  const queries = state.query === null ? DATA.query_tokens.map((_, i) => i) : [state.query];
  for (let h = 0; h < nH; h++) {
    if (!state.enabled[h]) continue;
    for (const q of queries) {
      weights[h][q].forEach((w, k) => {
        if (w <= 0) return;
        lines.appendChild(make("line", {
          x1: LEFT + WIDTH, y1: TOP + q * ROW + (h - (nH - 1) / 2) * spread,
          x2: LEFT + WIDTH + GAP, y2: TOP + k * ROW + (h - (nH - 1) / 2) * spread,
          stroke: COLORS[h % COLORS.length], "stroke-width": 2,
          "stroke-opacity": (state.query === null ? 0.4 : 1.0) * w,
          "data-head": h, "data-query": q, "data-key": k, "data-weight": w}));
      });
    }
  }
  DATA.query_tokens.forEach((token, i) => {
    const text = make("text", {x: LEFT + WIDTH - 6, y: TOP + i * ROW, "text-anchor": "end",
                               class: "token query" + (state.query === i ? " active" : ""), id: "query-" + i}, token);
    text.addEventListener("mouseenter", () => { state.query = i; draw(); });
    text.addEventListener("mouseleave", () => { state.query = null; draw(); });
    svg.appendChild(text);
  });
  DATA.key_tokens.forEach((token, i) => {
    svg.appendChild(make("text", {x: LEFT + WIDTH + GAP + 6, y: TOP + i * ROW, class: "token key",
                                  id: "key-" + i}, token));
  });
}
draw();
</script></body></html>
"""


def _head_view_layers(attentions, batch_index):
    """``attentions`` (one ``(B, H, Lq, Lk)``/``(H, Lq, Lk)`` array or a sequence of them) as a list
    of ``(H, Lq, Lk)`` NumPy arrays, one per layer."""
    if isinstance(attentions, Tensor) or backend.is_array(attentions):
        attentions = [attentions]
    layers = []
    for i, weights in enumerate(attentions):
        array = _host_array(weights, "head_view")
        if array.ndim == 4:
            array = array[batch_index]  # (H, Lq, Lk)
        if array.ndim != 3:
            raise ValueError(f"head_view: layer {i}'s weights must be (B, H, Lq, Lk) or (H, Lq, Lk), "
                             f"got shape {tuple(array.shape)}")
        if layers and array.shape != layers[0].shape:
            raise ValueError(f"head_view: layer {i}'s weights have shape {array.shape}, layer 0's {layers[0].shape}")
        layers.append(array)
    if not layers:
        raise ValueError("head_view: no attention weights given")
    return layers


def head_view(attentions, tokens, path, key_tokens=None, layer_names=None, batch_index=0,
              title="attention head view"):
    """Write an interactive head view of attention weights as one self-contained HTML file.

    In the manner of bertviz's head view: choose a layer, toggle heads (one colour each), hover
    a token on the left to see its attention to the tokens on the right as lines whose opacity is
    the weight (0.4 times the weight when no token is hovered: then every token's lines show).
    ``attentions``: one ``(B, H, Lq, Lk)`` or ``(H, Lq, Lk)`` array or tensor per layer (e.g. a
    ``BertModel``'s ``output_attentions``, or the ``attn_weights`` that a layer with
    ``keep_attn_weights = True`` keeps); ``batch_index`` picks the batch element. ``tokens`` label
    the queries; ``key_tokens`` the keys (default ``tokens``: self-attention; the source tokens for
    cross-attention, target-to-source). The page holds its data, script and style inline and
    fetches nothing. Returns ``path``.

    >>> import tempfile, pathlib
    >>> weights = [[[[0.9, 0.1], [0.4, 0.6]]]]                      # one layer, (H=1, Lq=2, Lk=2)
    >>> page = head_view(weights, ["a", "b"], pathlib.Path(tempfile.mkdtemp()) / "view.html")
    >>> "<script src" in page.read_text(), '"query_tokens": ["a", "b"]' in page.read_text()
    (False, True)
    """
    import html
    import json
    from pathlib import Path

    layers = _head_view_layers(attentions, batch_index)
    _, Lq, Lk = layers[0].shape
    tokens = _check_tokens(tokens, Lq, "query", layers[0].shape, "head_view")
    key_tokens = tokens if key_tokens is None else _check_tokens(key_tokens, Lk, "key", layers[0].shape, "head_view")
    names = list(layer_names) if layer_names is not None else [f"layer {i}" for i in range(len(layers))]
    if len(names) != len(layers):
        raise ValueError(f"head_view: {len(names)} layer names for {len(layers)} layers")
    data = {"query_tokens": tokens, "key_tokens": key_tokens,
            "layers": [{"name": name, "weights": np.round(w, 6).tolist()} for name, w in zip(names, layers)]}
    text = json.dumps(data).replace("</", "<\\/")  # nothing in the data can close the script element
    page = (_HEAD_VIEW_PAGE.replace("__TITLE__", html.escape(title))
            .replace("__QUERY__", "query" if key_tokens is tokens else "target").replace("__DATA__", text))
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
