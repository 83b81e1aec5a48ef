"""Checkpoints: ``ta.save`` / ``ta.load`` round trips, refusals, corrupt files, and atomic writes.

Round trips are bit for bit (dtype, shape and bytes: NaN payloads, -0.0 and subnormals
included); a damaged file gives an error naming it; and a write that fails at any point
leaves the previous checkpoint intact and no temporary file behind.
"""

import collections
import os
import tempfile

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import backend, serialization

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_]
names = st.text(alphabet="abcXYZ._-0123456789", min_size=1, max_size=12)
state_dicts = st.dictionaries(
    names,
    st.sampled_from(DTYPES).flatmap(lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_side=4))),
    max_size=6,
)


def assert_bitwise_equal(loaded, expected):
    assert type(loaded) is collections.OrderedDict
    assert list(loaded) == list(expected)
    for name, value in expected.items():
        value = value.numpy() if isinstance(value, ta.Tensor) else backend.to_numpy(value)
        assert type(loaded[name]) is np.ndarray
        assert loaded[name].dtype == value.dtype and loaded[name].shape == value.shape, name
        assert loaded[name].tobytes() == value.tobytes(), name


@given(state_dict=state_dicts)
def test_any_dict_of_arrays_round_trips_bit_for_bit(state_dict):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint")
        ta.save(state_dict, path)
        assert os.listdir(folder) == ["checkpoint"]
        assert_bitwise_equal(ta.load(path), state_dict)


def test_special_values_tensors_and_order_survive(tmp_path, device):
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], dtype=np.float32)
    payload_nan = np.array([0x7FC00123], dtype=np.uint32).view(np.float32)  # a NaN with a payload
    state_dict = {
        "z.last.weight": ta.tensor(special, device=device),  # keys stay in saved order, not sorted
        "a.first.bias": ta.tensor(np.arange(6.0).reshape(2, 3), device=device),  # float64 tensor
        "payload": payload_nan,
        "empty": np.zeros((0, 3), np.float32),
        "step": np.array(7, np.int64),
        "mask": backend.to_device(np.array([True, False]), device),  # a bare backend array
        "scale": 0.5,  # a number becomes a 0-d array
    }
    path = tmp_path / "model.ckpt"
    ta.save(state_dict, path)
    loaded = ta.load(path)
    state_dict["scale"] = np.asarray(0.5)
    assert_bitwise_equal(loaded, state_dict)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_module_state_dict_survives_save_load_load_state_dict(tmp_path, device, dtype):
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)).to(dtype).to(device)
    ta.save(model.state_dict(), tmp_path / "model.npz")
    fresh = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)).to(dtype).to(device)
    fresh.load_state_dict(ta.load(tmp_path / "model.npz"))
    original, restored = dict(model.named_parameters()), dict(fresh.named_parameters())
    assert list(original) == list(restored) == list(ta.load(tmp_path / "model.npz"))
    for name, param in original.items():
        assert restored[name].dtype == dtype and restored[name].device == device
        assert restored[name].numpy().tobytes() == param.numpy().tobytes(), name


def test_save_writes_exactly_the_path_given_and_numpy_reads_it(tmp_path):
    arrays = {"file": np.arange(3), "allow_pickle": np.ones(2)}  # names np.savez(**kw) could not take
    for name in ("weights", "weights.npz", "weights.ckpt"):
        ta.save(arrays, tmp_path / name)
        with np.load(tmp_path / name, allow_pickle=False) as archive:  # a plain .npz for plain NumPy
            assert archive.files == ["file", "allow_pickle"]
            np.testing.assert_array_equal(archive["file"], arrays["file"])
    assert sorted(os.listdir(tmp_path)) == ["weights", "weights.ckpt", "weights.npz"]


def test_save_replaces_an_existing_checkpoint(tmp_path):
    ta.save({"w": np.zeros(3)}, tmp_path / "c")
    ta.save({"v": np.ones(2, np.float32)}, tmp_path / "c")
    assert_bitwise_equal(ta.load(tmp_path / "c"), {"v": np.ones(2, np.float32)})


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_checkpoint_gets_ordinary_file_permissions(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    ta.save({"w": np.zeros(3)}, tmp_path / "c")
    assert os.stat(tmp_path / "c").st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize(
    "state_dict, error, words",
    [
        ({"names": np.array(["a", None], dtype=object)}, TypeError, "'names' is an array of Python objects"),
        ({"optimizer": {"lr": 0.1}}, TypeError, "the value of 'optimizer' is a dict"),
        ({"w": np.zeros(2), 3: np.zeros(1)}, TypeError, "keys must be strings, got 3"),
        ({"label": "text"}, TypeError, "the value of 'label' is a str"),
        ([("w", np.zeros(2))], TypeError, "expected a mapping of names to arrays"),
    ],
)
def test_save_refuses_what_needs_pickle_and_writes_nothing(tmp_path, state_dict, error, words):
    with pytest.raises(error, match=words):
        ta.save(state_dict, tmp_path / "c")
    assert os.listdir(tmp_path) == []


def test_save_into_a_missing_folder_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no_such_folder"):
        ta.save({"w": np.zeros(2)}, tmp_path / "no_such_folder" / "c")


def damaged_files():
    """(name, how to write a damaged checkpoint at a path, error type)."""

    def garbage(path):
        path.write_bytes(os.urandom(100))

    def truncated(path):
        ta.save({"w": np.arange(1000.0)}, path)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    def flipped_byte(path):  # a bit flipped in the data: the zip's CRC catches it
        ta.save({"w": np.arange(1000.0)}, path)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    def pickled_objects(path):
        with open(path, "wb") as file:
            np.savez(file, names=np.array(["a", None], dtype=object))

    def bare_npy(path):
        with open(path, "wb") as file:
            np.save(file, np.zeros(3))

    def torch_checkpoint(path):  # a zip archive too, but of pickles
        torch.save({"w": torch.zeros(3)}, path)

    def empty(path):
        path.write_bytes(b"")

    return [
        pytest.param(garbage, ValueError, id="garbage"),
        pytest.param(truncated, ValueError, id="truncated"),
        pytest.param(flipped_byte, ValueError, id="flipped byte"),
        pytest.param(pickled_objects, ValueError, id="object arrays"),
        pytest.param(bare_npy, ValueError, id=".npy, not .npz"),
        pytest.param(torch_checkpoint, ValueError, id="torch.save file"),
        pytest.param(empty, ValueError, id="empty"),
        pytest.param(lambda path: None, FileNotFoundError, id="missing"),
        pytest.param(lambda path: path.mkdir(), IsADirectoryError, id="a folder"),
    ]


@pytest.mark.parametrize("damage, error", damaged_files())
def test_a_damaged_checkpoint_gives_an_error_naming_the_file(tmp_path, damage, error):
    path = tmp_path / "damaged_checkpoint.npz"
    damage(path)
    with pytest.raises(error) as info:
        ta.load(path)
    assert str(path) in str(info.value)


def failures():
    """Ways a save can die midway: (module, attribute to patch, a maker of its failing stand-in)."""
    write_array = np.lib.format.write_array

    def dies_on_second_array(exception):
        def make():
            calls = []
            return lambda file, array, **options: write(calls, file, array, **options)

        def write(calls, file, array, **options):
            calls.append(array)
            if len(calls) == 2:
                file.write(b"half an array")
                raise exception
            write_array(file, array, **options)

        return make

    def raises(exception):
        def fail(*args, **kwargs):
            raise exception

        return lambda: fail

    return [
        pytest.param(np.lib.format, "write_array", dies_on_second_array(OSError("disk full")), id="write"),
        pytest.param(np.lib.format, "write_array", dies_on_second_array(KeyboardInterrupt()), id="interrupt"),
        pytest.param(os, "fsync", raises(OSError("fsync failed")), id="fsync"),
        pytest.param(serialization.os, "replace", raises(OSError("rename failed")), id="replace"),
    ]


@pytest.mark.parametrize("existing", [True, False], ids=["over a checkpoint", "new file"])
@pytest.mark.parametrize("module, attribute, make_failure", failures())
def test_a_save_that_dies_midway_leaves_the_old_checkpoint_and_no_temporary(
    tmp_path, monkeypatch, module, attribute, make_failure, existing
):
    path = tmp_path / "checkpoint"
    old = {"w": np.arange(6.0).reshape(2, 3), "b": np.ones(3, np.float32)}
    if existing:
        ta.save(old, path)
    monkeypatch.setattr(module, attribute, make_failure())
    with pytest.raises((OSError, KeyboardInterrupt)):
        ta.save({"w": np.zeros((2, 3)), "b": np.zeros(3, np.float32), "c": np.zeros(1)}, path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == (["checkpoint"] if existing else [])
    if existing:
        assert_bitwise_equal(ta.load(path), old)
