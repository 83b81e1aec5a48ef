"""``torch.utils.tensorboard.SummaryWriter`` through tensorboardX: what it writes, read back from the event files
(TFRecord framing, tensorboardX's ``Event`` protobuf), and its refusal without tensorboardX."""

import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.compat as tc
from tinyattn.compat.utils import tensorboard

tensorboardX = pytest.importorskip("tensorboardX")
from tensorboardX.proto.event_pb2 import Event  # noqa: E402


def events(folder):
    """Every ``Event`` in the event files of ``folder`` (not its subfolders), in order."""
    found = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not name.startswith("events.out.tfevents.") or not os.path.isfile(path):
            continue
        data = open(path, "rb").read()
        offset = 0
        while offset < len(data):  # a record: length (u64), its crc (u32), the bytes, their crc (u32)
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            found.append(Event.FromString(data[offset + 12:offset + 12 + length]))
            offset += 12 + length + 4
    return found


def values(folder):
    """``[(step, tag, value)]`` of the summaries in ``folder``'s event files."""
    return [(e.step, v.tag, v) for e in events(folder) if e.HasField("summary") for v in e.summary.value]


def test_scalars_from_numbers_and_compat_and_native_tensors_are_read_back(tmp_path):
    with tensorboard.SummaryWriter(str(tmp_path)) as writer:
        writer.add_scalar("loss", 0.25, 0)
        writer.add_scalar("loss", tc.tensor(0.125), global_step=1)
        writer.add_scalar("acc", ta.tensor([0.75]), global_step=tc.tensor(2))
    got = [(step, tag, v.simple_value) for step, tag, v in values(tmp_path)]
    assert got == [(0, "loss", 0.25), (1, "loss", 0.125), (2, "acc", 0.75)]
    assert events(tmp_path)[0].file_version.startswith("brain.Event:")


def test_add_scalars_writes_one_run_per_key(tmp_path):
    writer = tensorboard.SummaryWriter(str(tmp_path))
    writer.add_scalars("loss", {"train": tc.tensor(1.5), "val": 2.5}, 3)
    writer.close()
    for key, expected in (("train", 1.5), ("val", 2.5)):
        got = [(step, tag, v.simple_value) for step, tag, v in values(tmp_path / f"loss_{key}")]
        assert got == [(3, "loss", expected)]


def test_histogram_text_and_hparams(tmp_path):
    data = np.random.default_rng(0).standard_normal(1000)
    with tensorboard.SummaryWriter(str(tmp_path)) as writer:
        writer.add_histogram("weights", tc.tensor(data), 5)
        writer.add_text("note", "hello", 6)
        writer.add_hparams({"lr": 0.1, "layers": 2}, {"hparam/loss": tc.tensor(0.5)}, run_name="run")
        writer.flush()
    (step, tag, histogram), (text_step, text_tag, text) = values(tmp_path)[:2]
    assert (step, tag, text_step, text_tag) == (5, "weights", 6, "note/text_summary")
    assert histogram.histo.num == 1000 and math.isclose(histogram.histo.sum, data.sum(), rel_tol=1e-9)
    assert histogram.histo.min == data.min() and histogram.histo.max == data.max()
    assert text.tensor.string_val == [b"hello"] and text.metadata.plugin_data.plugin_name == "text"
    hparams = [v for _, _, v in values(tmp_path / "run")] + [v for _, _, v in values(tmp_path)]
    assert {v.metadata.plugin_data.plugin_name for v in hparams if v.HasField("metadata")} >= {"hparams"}
    assert [(t, v.simple_value) for _, t, v in values(tmp_path / "run") if t == "hparam/loss"] == [("hparam/loss", 0.5)]


def test_graph_is_refused_and_other_add_calls_pass_through(tmp_path):
    with tensorboard.SummaryWriter(str(tmp_path)) as writer:
        with pytest.raises(NotImplementedError, match="traces a torch model"):
            writer.add_graph(tc.nn.Linear(2, 2), tc.ones(1, 2))
        writer.add_image("image", tc.ones(3, 4, 4) * 0.5, 0)
        with pytest.raises(AttributeError, match="no `nope`"):
            _ = writer.nope
    assert [tag for _, tag, _ in values(tmp_path)] == ["image"]


def test_without_tensorboardx_the_writer_names_the_install(monkeypatch):
    real = tensorboard.importlib.util.find_spec
    monkeypatch.setattr(tensorboard.importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboardX" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match="pip install tensorboardX"):
        tensorboard.SummaryWriter()


def test_importing_the_module_imports_neither_tensorboardx_nor_torch():
    code = ("import sys, tinyattn.compat as torch, tinyattn.compat.utils.tensorboard; "
            "print('torch' in sys.modules, 'tensorboardX' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.split() == ["False", "False"]
