"""``torch.save`` / ``torch.load`` on compat, and what they add to tinyattn's checkpoint format: whole models
rebuilt only for allowlisted classes, open files, ``argparse.Namespace``; never pickle."""

import argparse
import io
import pickle
import zipfile

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.compat as compat

nn = compat.nn


class TinyLM(nn.Module):
    def __init__(self, vocab, width, layers=1, dropout=0.0, options=None):
        super().__init__()
        self.embedding = nn.Embedding(vocab, width)
        self.rnn = nn.GRU(width, width, layers, dropout=dropout)
        self.head = nn.Linear(width, vocab)
        self.head.weight = self.embedding.weight
        self.options = options or {}

    def forward(self, x):
        return self.head(self.rnn(self.embedding(x))[0])


class WithConfig(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.linear = nn.Linear(config.width, 2)


def _saved(obj):
    buffer = io.BytesIO()
    compat.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_weights_only_false_rebuilds_any_importable_class_as_torch_would():
    model = TinyLM(11, 4, layers=2, options={"tied": True, "sizes": [1, 2]}).double()
    loaded = compat.load(_saved(model), weights_only=False)
    assert type(loaded) is TinyLM and compat.serialization.get_safe_globals() == []
    x = compat.tensor([[1, 2], [3, 4]])
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())


def test_weights_only_false_names_a_class_it_cannot_import():
    class Local(nn.Module):  # defined in a function: no import reaches it, as no unpickler would
        def __init__(self, width):
            super().__init__()
            self.linear = nn.Linear(width, 2)

    with pytest.raises(pickle.UnpicklingError, match=r"has no class .*Local"):
        compat.load(_saved(Local(3)), weights_only=False)


def test_a_whole_model_comes_back_only_for_an_allowlisted_class():
    model = TinyLM(11, 4, layers=2, options={"tied": True, "sizes": [1, 2]}).double()
    model.rnn.eval()
    buffer = _saved(model)
    with pytest.raises(pickle.UnpicklingError, match=r"TinyLM.*safe_globals\(\[TinyLM\]\).*state_dict\(\)"):
        compat.load(buffer)
    buffer.seek(0)
    with compat.serialization.safe_globals([TinyLM]):
        loaded = compat.load(buffer)
    assert compat.serialization.get_safe_globals() == []
    assert type(loaded) is TinyLM and loaded.options == {"tied": True, "sizes": [1, 2]}
    assert loaded.head.weight is loaded.embedding.weight and loaded.embedding.weight.dtype == np.float64
    assert loaded.training and not loaded.rnn.training
    x = compat.tensor([[1, 2], [3, 4]])
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())


def test_add_safe_globals_allows_a_class_everywhere(tmp_path):
    path = tmp_path / "model.pt"
    compat.save(TinyLM(5, 3), path)
    compat.serialization.add_safe_globals([TinyLM])
    try:
        assert type(compat.load(path)) is TinyLM
    finally:
        compat.serialization.clear_safe_globals()
    with pytest.raises(pickle.UnpicklingError):
        compat.load(path)


def test_a_model_whose_constructor_took_an_object_is_refused_at_saving_naming_state_dict():
    config = argparse.Namespace(width=3)
    with pytest.raises(TypeError, match=r"argument 0 = Namespace.*state_dict\(\)"):
        compat.save(WithConfig(config), io.BytesIO())
    with pytest.raises(TypeError, match=r"state_dict\(\) instead"):
        compat.save({"optimizer": compat.optim.SGD(TinyLM(3, 2).parameters(), lr=0.1)}, io.BytesIO())


def test_native_load_refuses_a_whole_model_and_says_how_to_load_it(tmp_path):
    compat.save(TinyLM(5, 3), tmp_path / "model.pt")
    with pytest.raises(TypeError, match=r"whole .*TinyLM object.*safe_globals.*state_dict\(\)"):
        ta.load(tmp_path / "model.pt")


def test_a_checkpoint_holds_a_namespace_and_goes_through_open_files(tmp_path):
    model = TinyLM(7, 4)
    optimizer = compat.optim.AdamW(model.parameters(), lr=1e-3)
    model(compat.tensor([[1, 2]])).sum().backward()
    optimizer.step()
    args = argparse.Namespace(lr=1e-3, name="run", layers=[1, 2], nested=argparse.Namespace(seed=3))
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "config": args,
                  "best_val_loss": compat.tensor(1.25), "iter_num": 4}
    path = tmp_path / "ckpt.pt"
    with open(path, "wb") as f:
        compat.save(checkpoint, f)
    with open(path, "rb") as f:
        loaded = compat.load(f, map_location=compat.device("cpu"))
    assert loaded["config"] == args and isinstance(loaded["config"].nested, argparse.Namespace)
    assert loaded["iter_num"] == 4 and float(loaded["best_val_loss"]) == 1.25
    fresh = TinyLM(7, 4)
    fresh.load_state_dict(loaded["model"])
    compat.optim.AdamW(fresh.parameters(), lr=1e-3).load_state_dict(loaded["optimizer"])
    assert zipfile.is_zipfile(path) and not any(name.endswith(".pkl") for name in zipfile.ZipFile(path).namelist())


def test_a_damaged_file_object_is_refused_whole():
    buffer = _saved({"w": compat.ones(3)})
    data = bytearray(buffer.getvalue())
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(ta.CheckpointError):
        compat.load(io.BytesIO(bytes(data)))
    with pytest.raises(ta.CheckpointError, match="not a zip archive"):
        compat.load(io.BytesIO(b"not a checkpoint"))


def test_pickle_modules_are_refused():
    with pytest.raises(ValueError, match="never pickles"):
        compat.save({}, io.BytesIO(), pickle_module=pickle)
    with pytest.raises(ValueError, match="never unpickles"):
        compat.load(_saved({}), pickle_module=pickle)


def test_torch_state_dicts_load_into_compat_models_through_a_checkpoint(tmp_path):
    torch.manual_seed(0)
    theirs = torch.nn.GRU(3, 4, 2).double()
    compat.save({k: v.detach().numpy() for k, v in theirs.state_dict().items()}, tmp_path / "gru.pt")
    ours = nn.GRU(3, 4, 2).double()
    ours.load_state_dict(compat.load(tmp_path / "gru.pt"))
    x = np.random.default_rng(0).standard_normal((5, 2, 3))
    np.testing.assert_allclose(ours(compat.tensor(x))[0].numpy(), theirs(torch.tensor(x))[0].detach().numpy(),
                               rtol=1e-12)


def test_a_loaded_model_moves_as_scripts_move_it():
    with compat.serialization.safe_globals([TinyLM]):
        model = compat.load(_saved(TinyLM(5, 3))).to(compat.device("cpu"), non_blocking=True)
    assert model.to(compat.float64).embedding.weight.dtype == np.float64


def test_the_native_format_takes_files_and_namespaces_and_keeps_loading_plain_archives(tmp_path):
    state = {"weights": np.arange(6.0).reshape(2, 3), "args": argparse.Namespace(depth=2, names=("a", "b"))}
    buffer = io.BytesIO()
    ta.save(state, buffer)
    loaded = ta.load(io.BytesIO(buffer.getvalue()))
    np.testing.assert_array_equal(loaded["weights"], state["weights"])
    assert loaded["args"] == state["args"] and isinstance(loaded["args"].names, tuple)
    path = tmp_path / "plain.npz"
    np.savez(path, **{"layer.weight": np.ones(2)})
    with open(path, "rb") as f:
        assert list(ta.load(f)) == ["layer.weight"]
