"""The benchmark's yardsticks: the hand-written NumPy floor computes what the encoder layer computes,
and the benchmark and the profiler run and report what they say they report."""

import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn.fast import blocks, router, tuning

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import numpy_encoder  # noqa: E402

# the floor's parameter names -> the layer's
NAMES = {
    "norm1.weight": "norm1.weight", "norm1.bias": "norm1.bias",
    "wq": "self_attn.q_proj.weight", "bq": "self_attn.q_proj.bias",
    "wk": "self_attn.k_proj.weight", "bk": "self_attn.k_proj.bias",
    "wv": "self_attn.v_proj.weight", "bv": "self_attn.v_proj.bias",
    "wo": "self_attn.out_proj.weight", "bo": "self_attn.out_proj.bias",
    "norm2.weight": "norm2.weight", "norm2.bias": "norm2.bias",
    "w1": "linear1.weight", "b1": "linear1.bias", "w2": "linear2.weight", "b2": "linear2.bias",
}


@pytest.mark.parametrize("B, L, d, H", [(2, 5, 8, 2), (3, 4, 12, 3)])
def test_numpy_floor_matches_the_encoder_layer(B, L, d, H):
    rng = np.random.default_rng(B)
    params = numpy_encoder.init_params(d, H, 4 * d, dtype=np.float64, seed=B)
    params["norm1.weight"] = rng.uniform(0.5, 1.5, d)  # not the identity, so that a wrong LayerNorm shows
    params["bq"], params["norm2.bias"] = rng.standard_normal(d), rng.standard_normal(d)
    x, upstream = rng.standard_normal((B, L, d)), rng.standard_normal((B, L, d))
    y_floor, grads = numpy_encoder.forward_backward(x, upstream, params, H)

    layer = nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0, norm_first=True).double()
    layer.load_state_dict({NAMES[name]: value for name, value in params.items()})
    x_ta = ta.tensor(x, requires_grad=True)
    y = layer(x_ta)
    y.backward(upstream)
    np.testing.assert_allclose(y.numpy(), y_floor, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(x_ta.grad, grads["x"], rtol=1e-10, atol=1e-12)
    ours = dict(layer.named_parameters())
    for name, grad in grads.items():
        if name != "x":
            np.testing.assert_allclose(ours[NAMES[name]].grad, grad, rtol=1e-10, atol=1e-12, err_msg=name)


def test_benchmark_writes_its_table_and_the_profiler_its_top_entries(tmp_path):
    table = tmp_path / "bench.json"
    subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), "--cases", "encoder", "--sizes", "small",
                    "--repeat", "5", "--json", str(table)], check=True, capture_output=True, timeout=300)
    rows = json.loads(table.read_text())
    assert [(r["case"], r["size"], r["pass"]) for r in rows] == [("encoder", "small", "fwd"),
                                                                  ("encoder", "small", "fwd+bwd")]
    backward = rows[1]
    assert backward["tinyattn_ms"] > 0 and backward["pytorch_ms"] > 0 and backward["floor_ms"] > 0
    assert backward["ratio"] == pytest.approx(backward["tinyattn_ms"] / backward["pytorch_ms"])
    assert backward["ratio_to_floor"] == pytest.approx(backward["tinyattn_ms"] / backward["floor_ms"])
    assert backward["products_over_pytorch"] == pytest.approx(backward["products_ms"] / backward["pytorch_ms"])

    result = subprocess.run([sys.executable, str(BENCHMARKS / "profile_step.py"), "--steps", "5", "--top", "5"],
                            check=True, capture_output=True, text=True, timeout=300)
    assert "tottime" in result.stdout and "tinyattn" in result.stdout


def test_the_bert_rows_run_and_the_peak_counts_each_product(tmp_path):
    table = tmp_path / "bert.json"
    subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), "--cases", "bert_layer,bert6",
                    "--sizes", "small", "--repeat", "3", "--json", str(table)], check=True, capture_output=True,
                   timeout=300)
    rows = json.loads(table.read_text())
    assert [(r["case"], r["size"], r["pass"]) for r in rows] == [
        ("bert_layer", "small", "fwd"), ("bert_layer", "small", "fwd+bwd"), ("bert6", "batch8", "inference")]
    assert all(r["tinyattn_ms"] > 0 and r["pytorch_ms"] > 0 for r in rows)
    bert6 = rows[2]  # both libraries skip the padding; the like-for-like row beside it computes every position
    assert bert6["tinyattn_every_position_ms"] > 0 and bert6["pytorch_every_position_ms"] > 0
    assert bert6["ratio_every_position"] == pytest.approx(
        bert6["tinyattn_every_position_ms"] / bert6["pytorch_every_position_ms"])

    import run  # benchmarks/run.py

    assert run.SIZES["small"] == (2, 16, 32, 4)  # M = B·L = 32 rows, d = 32, F = 4·d = 128
    products = 2 * 32 * 32 * 96 + 2 * 32 * 32 * 32 + 2 * (2 * 32 * 32 * 128) + 2 * (2 * 2 * 16 * 16 * 32)
    assert run.encoder_flops("small") == (products, 3 * products)
    for size in run.SIZES:  # the products-only step runs exactly the layer's products, forward and backward
        B, L, d, H = run.SIZES[size]
        assert numpy_encoder.products_only(B, L, d, H, 4 * d).flops == run.encoder_flops(size)[1]


def test_the_benchmark_compiles_tinyattn_s_side_unless_asked_for_the_reference(monkeypatch):
    import run  # benchmarks/run.py

    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    compiled = run.compiled(layer)  # ta.compile's copy: the fused form's class, the same parameters
    assert type(compiled).compiled_from is nn.TransformerEncoderLayer
    assert compiled.linear1.weight is layer.linear1.weight
    assert run.compiled(F.cross_entropy).__module__ == "tinyattn.fast.compile"
    monkeypatch.setattr(run, "REFERENCE", True)  # --reference
    assert run.compiled(layer) is layer and run.compiled(F.cross_entropy) is F.cross_entropy


def test_the_blocked_threshold_script_times_both_paths():
    import blocked_threshold  # benchmarks/blocked_threshold.py

    from tinyattn.fast import BlockedAttention

    step = blocked_threshold.step_of(1, 8, 8, 2)
    for threshold, blocked_calls in ((9, 0), (8, 1)):  # the whole matrix, then blocks of keys
        with mock.patch.object(BlockedAttention, "forward", autospec=True, side_effect=BlockedAttention.forward) as spy:
            with tuning.tuned(blocked_attention_min_keys=threshold):
                step()
        assert spy.call_count == blocked_calls


def test_the_gelu_sweep_times_each_piece_size_and_puts_the_value_back(capsys, monkeypatch):
    import pool_threshold  # benchmarks/pool_threshold.py

    seen = []
    real = router.gelu_schedule
    monkeypatch.setattr(router, "gelu_schedule", lambda z: seen.append(real(z).ranges) or real(z))
    pool_threshold.gelu_pieces(1, sizes=((40, 50),), piece_sizes=(500, 4000))
    assert tuning.values.gelu_piece_elements == 1 << 17  # put back
    assert seen == [tuple((start, start + 10) for start in range(0, 40, 10)), ((0, 40),)]  # 4 pieces, then one
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["rows", "x", "F", "500", "4000"]
    assert lines[1].split()[:3] == ["40", "x", "50"] and all(float(ms) > 0 for ms in lines[1].split()[3:])


def test_the_sequences_sweep_times_both_routes_of_attention(capsys):
    import pool_threshold  # benchmarks/pool_threshold.py

    sentences = mock.patch.object(blocks, "attention_by_sequences", wraps=blocks.attention_by_sequences)
    with sentences as by_sequences:
        pool_threshold.sequences(1, grid=((5, (3,)),))
    assert by_sequences.call_count == 3  # the two warm-up steps and the one timed, sentence by sentence
    assert tuning.values.sequence_attention_min_length == 3.0  # put back
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["l_max", "B", "tokens", "mean", "by", "sentence", "ms", "padded", "ms", "ratio"]
    l_max, B, tokens, mean, by_sentence, padded, ratio = lines[1].split()
    assert (l_max, B) == ("5", "3") and 5 <= int(tokens) <= 15
    assert float(mean) == pytest.approx(int(tokens) / 3, abs=0.05)
    assert float(ratio) == pytest.approx(float(by_sentence) / float(padded), abs=0.01)


def test_the_products_on_pool_comparison_times_both_ways_and_puts_the_switch_back(capsys, monkeypatch):
    import pool_threshold  # benchmarks/pool_threshold.py
    import run  # benchmarks/run.py

    switch = []
    real_cases = {name: getattr(run, name) for name in ("bert_layer_cases", "encoder_cases")}

    def small(name):  # the same cases at the small size, recording the switch at each step
        def cases(size, backward):
            step = real_cases[name]("small", backward)["tinyattn"]
            return {"tinyattn": lambda: switch.append(tuning.values.products_on_pool) or step()}
        return cases

    for name in real_cases:
        monkeypatch.setattr(run, name, small(name))
    pool_threshold.products_on_pool(2)
    assert tuning.values.products_on_pool is True  # put back
    assert switch.count(True) == switch.count(False) > 0  # both ways, as often
    lines = capsys.readouterr().out.splitlines()
    assert "right after a two-thread GEMM" in lines[0]
    rows = [line.split() for line in lines[2:]]
    assert [row[:2] for row in rows] == [["bert_layer", "medium"], ["encoder", "medium"], ["encoder", "large"]]
    for *_, on, off, ratio in rows:  # the ratio of the times as printed, to their rounding (0.005 ms) and its own
        on, off, ratio = float(on), float(off), float(ratio)
        assert on > 0 and off > 0.005
        assert (on - 0.005) / (off + 0.005) - 0.005 <= ratio <= (on + 0.005) / (off - 0.005) + 0.005



def test_the_executor_comparison_runs_both_pools_and_puts_the_pool_back(capsys):
    import pool_threshold  # benchmarks/pool_threshold.py

    from tinyattn.fast import parallel

    own, passes = parallel._pool(), []
    run_on_executor = pool_threshold._ExecutorPool.run

    def counted(self, task, ranges):
        passes.append(len(ranges))
        return run_on_executor(self, task, ranges)

    with mock.patch.object(pool_threshold._ExecutorPool, "run", counted):
        pool_threshold.executor(1)
    assert parallel._POOL is own  # put back
    assert passes and min(passes) > 1  # the executor ran pooled passes of several pieces
    lines = capsys.readouterr().out.splitlines()
    rows = [line.rsplit(None, 3) for line in lines[1:]]
    assert [row[0] for row in rows] == ["attention fwd+bwd", "layer norm", "two empty pieces"]
    for _, mine, theirs, ratio in rows:
        assert float(mine) > 0 and float(theirs) > 0
        assert float(ratio) == pytest.approx(float(theirs) / float(mine), abs=0.01)


def test_compare_trees_alternates_the_trees_case_by_case_and_marks_the_rows_over_the_bar():
    import compare_trees  # benchmarks/compare_trees.py

    order = compare_trees.schedule(["mha", "train"], 2)
    assert order[:6] == [("mha", 0, "before"), ("mha", 0, "after"), ("mha", 0, "control"),
                         ("mha", 1, "control"), ("mha", 1, "after"), ("mha", 1, "before")]
    assert len(order) == 12 and order[6][0] == "train"

    def rows(small, medium):
        return [{"case": "mha", "size": "small", "pass": "fwd", "ratio": small},
                {"case": "mha", "size": "medium", "pass": "fwd", "ratio": medium}]

    runs = {"before": [rows(1.0, 2.0), rows(1.2, 2.2), rows(1.1, 1.0)],
            "after": [rows(1.2, 2.0), rows(1.1, 2.0), rows(1.15, 2.1)],
            "control": [rows(1.1, 2.0), rows(1.1, 2.3), rows(1.1, 2.3)]}
    small, medium = compare_trees.summarize(runs)
    assert small["key"] == ("mha", "small", "fwd")
    assert small["before"] == (1.1, 1.0, 1.2) and small["after"] == (1.15, 1.1, 1.2)
    assert small["after_over_before"] == pytest.approx(1.15 / 1.1) and small["over"]  # 4.5% slower
    assert small["control_over_before"] == pytest.approx(1.0) and not small["control_over"]
    assert medium["after_over_before"] == pytest.approx(1.0) and not medium["over"]
    assert medium["control_over_before"] == pytest.approx(1.15) and medium["control_over"]
    table = compare_trees.markdown([small, medium])
    assert "| mha | small | fwd | 1.100 (1.00–1.20) | 1.150 (1.10–1.20) | 1.045 ✗ |" in table
    assert table.rstrip().endswith("after ÷ before over 1.03: 1 of 2 rows; control ÷ before over 1.03: 1 of 2")


def test_compare_trees_runs_each_trees_own_benchmark(tmp_path):
    import compare_trees  # benchmarks/compare_trees.py

    rows = compare_trees.run_once(str(BENCHMARKS.parent), "sdpa", str(tmp_path / "sdpa.json"),
                                  extra=("--sizes", "small", "--repeat", "2", "--keep-freed-memory"))
    assert [(row["case"], row["size"], row["pass"]) for row in rows] == [("sdpa", "small", "fwd"),
                                                                          ("sdpa", "small", "fwd+bwd")]
    assert all(row["ratio"] > 0 for row in rows)
