"""tinyattn.viz: heatmaps and loss curves are written, the DOT graph names every operation."""

import re

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import viz

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _image_panels(figure):
    return [axes for axes in figure.axes if axes.images]


def test_plot_attention_writes_png_with_one_panel_per_head(tmp_path):
    weights = ta.randn(3, 4, 5)
    weights = (weights - weights.amax(dim=-1, keepdim=True)).exp()
    weights = weights / weights.sum(dim=-1, keepdim=True)  # (H=3, Lq=4, Lk=5), rows sum to 1
    path = tmp_path / "attention.png"
    figure = viz.plot_attention(weights, list("abcd"), list("vwxyz"), path=path, title="three heads")
    assert path.read_bytes()[:8] == PNG_SIGNATURE and path.stat().st_size > 1000
    panels = _image_panels(figure)
    assert len(panels) == 3
    assert [axes.get_title() for axes in panels] == ["head 0", "head 1", "head 2"]
    assert [label.get_text() for label in panels[0].get_xticklabels()] == list("vwxyz")
    assert [label.get_text() for label in panels[0].get_yticklabels()] == list("abcd")


def test_plot_attention_takes_one_head_as_array_or_list(tmp_path):
    figure = viz.plot_attention(np.eye(3), path=tmp_path / "one.png")
    assert len(_image_panels(figure)) == 1
    assert len(_image_panels(viz.plot_attention([[0.5, 0.5], [1.0, 0.0]], ["p", "q"], ["r", "s"]))) == 1


def test_plot_attention_on_the_strict_device():
    weights = ta.tensor(np.full((2, 2, 2), 0.5), device="strict")  # refuses implicit trips to NumPy
    assert len(_image_panels(viz.plot_attention(weights))) == 2


@pytest.mark.parametrize(
    "query_tokens, key_tokens, expected",
    [
        (list("abc"), list("vwxyz"), r"3 query_tokens .* shape \(2, 4, 5\).* 4"),
        (list("abcd"), list("vw"), r"2 key_tokens .* shape \(2, 4, 5\).* 5"),
    ],
)
def test_plot_attention_rejects_token_counts_that_do_not_match(query_tokens, key_tokens, expected):
    with pytest.raises(ValueError, match=expected):
        viz.plot_attention(np.zeros((2, 4, 5)), query_tokens, key_tokens)


def test_plot_attention_rejects_a_batch():
    with pytest.raises(ValueError, match=r"\(1, 2, 3, 3\).*weights\[b\]"):
        viz.plot_attention(np.zeros((1, 2, 3, 3)))


def test_plot_loss_writes_png(tmp_path):
    path = tmp_path / "loss.png"
    losses = list(2.0 * np.exp(-np.linspace(0, 5, 120)) + 0.01)
    figure = viz.plot_loss(losses, path=path)
    assert path.read_bytes()[:8] == PNG_SIGNATURE and path.stat().st_size > 1000
    assert figure.axes[0].get_yscale() == "log"  # the values span more than a factor of 20
    with pytest.raises(ValueError, match="empty"):
        viz.plot_loss([])


def test_to_dot_names_every_operation_and_edge_direction():
    w = ta.randn(3, 2, requires_grad=True)
    x = ta.randn(4, 3)
    loss = ((x @ w).tanh() - 1.0).exp().mean()
    dot = viz.to_dot(loss, names={"w": w, "x": x})
    for op in ("MatMul", "Tanh", "Sub", "Exp", "Sum"):
        assert f'label="{op}"' in dot, op
    assert '"w\\n(3, 2)\\nfloat32"' in dot and '"x\\n(4, 3)\\nfloat32"' in dot
    ids = dict(re.findall(r'  (\w+) \[label="([^"]*)"', dot))
    edges = re.findall(r"  (\w+) -> (\w+);", dot)
    matmul = next(node for node, label in ids.items() if label == "MatMul")
    inputs = {ids[child].split("\\n")[0] for parent, child in edges if parent == matmul}
    assert inputs == {"w", "x"}  # backward walks from the operation to its inputs
    assert dot.count("->") == len(edges)


def test_to_dot_shares_a_tensor_used_twice_and_survives_backward():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    z = (y + y).sum()
    z.backward()  # frees the saved arrays; the graph stays drawable
    dot = viz.to_dot(z)
    assert dot.count('label="Mul"') == 1 and dot.count('label="Add"') == 1
    assert dot.count("(2,)\\nfloat32") == 3  # y + y, y and x: each tensor once


def test_to_dot_walks_a_deep_graph_without_recursion():
    x = ta.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0
    assert viz.to_dot(y).count('label="Mul"') == 5000


def test_render_dot_without_graphviz_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="install Graphviz"):
        viz.render_dot(ta.ones(2, requires_grad=True).sum(), tmp_path / "graph.png")


@pytest.mark.skipif(viz.shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_dot_writes_png(tmp_path):
    x = ta.ones(2, requires_grad=True)
    path = viz.render_dot((x * 2).sum(), tmp_path / "graph.png")
    assert open(path, "rb").read()[:8] == PNG_SIGNATURE
