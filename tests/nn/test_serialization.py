"""Checkpoints: ``ta.save`` / ``ta.load`` round trips, refusals, damaged files, atomic writes, and resuming.

Round trips are exact (containers, key types and order, dtype, shape and bytes: NaN payloads,
-0.0 and subnormals included); a damaged file is refused with an error naming it, never loaded
in part (every truncation, a derandomized sample of single-bit flips, and the damage a manifest
alone can see; ``benchmarks/checkpoint_corruption.py`` flips every bit); a write that fails at
any point leaves the previous checkpoint intact and no temporary file behind; and training
resumed from a checkpoint is bit for bit the training that never stopped.
"""

import collections
import io
import os
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import backend, optim, serialization

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import checkpoint_corruption  # noqa: E402
from checkpoint_corruption import same  # noqa: E402

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_]
names = st.text(alphabet="abcXYZ._-0123456789", min_size=1, max_size=12)
arrays = st.sampled_from(DTYPES).flatmap(lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_side=4)))
state_dicts = st.dictionaries(names, arrays, max_size=6)
keys = st.one_of(
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=6), st.text("ab/.~", max_size=4),
    st.integers(-3, 3),
)
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.complex_numbers(), st.text(max_size=6),
    arrays, arrays.filter(lambda a: a.ndim == 0).map(lambda a: a[()]),  # NumPy scalars
)


def containers(children):
    lists = st.lists(children, max_size=3)
    return st.one_of(lists, lists.map(tuple), st.dictionaries(keys, children, max_size=3))


nested = st.recursive(leaves, containers, max_leaves=12)


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


@given(obj=nested)
def test_any_nesting_of_dicts_lists_tuples_and_values_comes_back_the_same(obj):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint")
        ta.save({"root": obj}, path)
        assert same(ta.load(path), {"root": obj})
        ta.save(obj, path)  # any value at the top, too
        assert same(ta.load(path), obj)


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
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    }
    path = tmp_path / "model.ckpt"
    ta.save(state_dict, path)
    assert_bitwise_equal(ta.load(path), state_dict)


def test_a_training_checkpoint_keeps_its_python_values_and_key_types(tmp_path):
    model = nn.Linear(3, 2)
    opt = optim.Adam(model.parameters(), lr=0.01)
    model(ta.ones(4, 3)).sum().backward()
    opt.step()
    checkpoint = {
        "model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "loss": float("nan"),
        "zero": -0.0, "big": 2**100, "payload": struct.unpack("<d", bytes.fromhex("0100000000f8ffff"))[0],
        "complex": complex(float("-inf"), -0.0), "name": "run\x00one", "done": False, "best": None,
        "rng": ta.get_rng_state(),
    }
    ta.save(checkpoint, tmp_path / "c")
    loaded = ta.load(tmp_path / "c")
    assert same(loaded, checkpoint)
    assert list(loaded["optimizer"]["state"]) == [0, 1]  # integer keys stay integers
    assert loaded["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)  # a tuple stays a tuple
    assert type(loaded["optimizer"]["state"][0]["step"]) is int


def test_paths_may_be_str_bytes_or_pathlike(tmp_path):
    for path in (str(tmp_path / "a"), os.fsencode(tmp_path / "b"), tmp_path / "c"):
        ta.save({"w": np.arange(3)}, path)
        assert_bitwise_equal(ta.load(path), {"w": np.arange(3)})
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "c"]
    for function, args in ((ta.save, ({},)), (ta.load, ())):
        with pytest.raises(TypeError, match=f"{function.__name__}: path must be a str, bytes or os.PathLike, got int"):
            function(*args, 3)


def test_save_writes_exactly_the_path_given_and_numpy_reads_it(tmp_path):
    arrays = {"file": np.arange(3), "allow_pickle": np.ones(2)}  # names np.savez(**kw) could not take
    for name in ("weights", "weights.npz", "weights.ckpt"):
        ta.save(arrays, tmp_path / name)
        with np.load(tmp_path / name, allow_pickle=False) as archive:  # a plain .npz for plain NumPy
            assert archive.files == [serialization.MANIFEST, "file", "allow_pickle"]
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


def contains_itself():
    loop = {"w": np.zeros(2)}
    loop["again"] = [loop]
    return loop


@pytest.mark.parametrize(
    "obj, error, words",
    [
        ({"names": np.array(["a", None], dtype=object)}, TypeError, r"\['names'\] is an array of Python objects"),
        ({"w": np.zeros(2), 3.5: np.zeros(1)}, TypeError, "keys must be strings .* got 3.5 of type float"),
        ({"w": {True: 1}}, TypeError, r"got True of type bool in \['w'\]"),
        ({"w": {None: 1}}, TypeError, "got None of type NoneType"),
        ({"a\x00b": np.zeros(1), "a": np.ones(1)}, ValueError, r"the key 'a\\x00b' .* contains the character '\\x00'"),
        ({"opt": {"line\nbreak": 1}}, ValueError, r"in \['opt'\] contains the character '\\n'"),
        ({"s\ud800": 1}, ValueError, "lone surrogates"),
        ({"ids": {1, 2}}, TypeError, r"the value at \['ids'\] is a set"),
        ({"steps": range(3)}, TypeError, "is a range"),
        ({"pair": collections.namedtuple("Pair", "a b")(1, 2)}, TypeError, "is a Pair"),
        ({"f": print}, TypeError, "is a builtin_function_or_method"),
        ({"w": [np.zeros(1), {"x": object()}]}, TypeError, r"\['w'\]\[1\]\['x'\] is a object"),
        (contains_itself(), ValueError, r"the value at \['again'\]\[0\] contains itself"),
    ],
)
def test_save_refuses_what_cannot_come_back_and_writes_nothing(tmp_path, obj, error, words):
    with pytest.raises(error, match=words):
        ta.save(obj, tmp_path / "c")
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
        pytest.param(garbage, ta.CheckpointError, id="garbage"),
        pytest.param(truncated, ta.CheckpointError, id="truncated"),
        pytest.param(flipped_byte, ta.CheckpointError, id="flipped byte"),
        pytest.param(pickled_objects, ta.CheckpointError, id="object arrays"),
        pytest.param(bare_npy, ta.CheckpointError, id=".npy, not .npz"),
        pytest.param(torch_checkpoint, ta.CheckpointError, id="torch.save file"),
        pytest.param(empty, ta.CheckpointError, id="empty"),
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


def test_files_written_before_the_manifest_still_load(tmp_path):
    arrays = {"linear.weight": np.arange(6.0).reshape(2, 3), "linear.bias": np.ones(2, np.float32)}
    np.savez(tmp_path / "plain.npz", **arrays)
    np.savez_compressed(tmp_path / "compressed.npz", **arrays)
    for name in ("plain.npz", "compressed.npz"):
        assert_bitwise_equal(ta.load(tmp_path / name), arrays)


def rewrite(path, replace=(), drop=(), add=(), comment=None):
    """Rebuild the zip at ``path`` as a valid zip (its own CRCs right) with members replaced, dropped or added."""
    with zipfile.ZipFile(path) as archive:
        members = [(name, archive.read(name)) for name in archive.namelist() if name not in drop]
        old_comment = archive.comment
    replace = dict(replace)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members + list(add):
            archive.writestr(name, replace.get(name, data))
        archive.comment = old_comment if comment is None else comment


def npy(array):
    stream = io.BytesIO()
    np.save(stream, array)
    return stream.getvalue()


@pytest.mark.parametrize(
    "damage, words",
    [
        (dict(replace={"model/w.npy": npy(np.zeros((2, 3), np.float32))}), r"\['w'\] do not match their CRC32"),
        (dict(replace={"model/w.npy": npy(np.ones((3, 2), np.float32))}), r"has dtype float32 and shape \(3, 2\)"),
        (dict(replace={"model/w.npy": npy(np.ones((2, 3)))}), "has dtype float64"),
        (dict(drop=["opt/state/0/m.npy"]), r"lacks: the array at \['opt'\]\['state'\]\[0\]\['m'\] \(member 'opt/st"),
        (dict(add=[("extra.npy", npy(np.ones(1)))]), r"members its manifest does not list: \['extra.npy'\]"),
        (dict(drop=[serialization.MANIFEST]), "its manifest 'tinyattn_manifest.json' is missing"),
        (dict(comment=b"hello"), "its zip comment b'hello' is not the one tinyattn.save writes"),
        (dict(replace={serialization.MANIFEST: b"{"}), "JSONDecodeError"),
        (dict(replace={serialization.MANIFEST: b'{"format": "other"}'}), "not in the format"),
    ],
)
def test_a_zip_that_disagrees_with_its_manifest_is_refused_naming_the_file_and_key(tmp_path, damage, words):
    path = tmp_path / "checkpoint.npz"
    ta.save({"model": {"w": np.ones((2, 3), np.float32)}, "opt": {"state": {0: {"m": np.ones(3)}}}}, path)
    rewrite(path, **damage)
    with pytest.raises(ta.CheckpointError, match=words) as info:
        ta.load(path)
    assert str(path) in str(info.value)


def test_a_damaged_zip_directory_that_hides_members_is_caught(tmp_path):
    """One bit flipped in the first central-directory entry's comment length (+32768) makes zipfile
    stop reading the directory after that entry: np.load then sees fewer arrays, without an error."""
    path = tmp_path / "checkpoint.npz"
    ta.save({"a": np.zeros(2), "b": np.ones(3), "c": np.arange(4)}, path)
    data = bytearray(path.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    first_entry = int.from_bytes(data[end + 16 : end + 20], "little")  # the central directory's offset
    assert data[first_entry : first_entry + 4] == b"PK\x01\x02"
    data[first_entry + 33] ^= 0x80  # the high byte of the comment length (offset 32, two bytes)
    path.write_bytes(bytes(data))
    with np.load(path) as archive:
        assert archive.files == [serialization.MANIFEST]  # what a plain .npz would silently lose
    lost = r"lacks: the array at \['a'\] \(member 'a.npy'\), the array at \['b'\] .*, the array at \['c'\]"
    with pytest.raises(ta.CheckpointError, match=lost) as info:
        ta.load(path)
    assert str(path) in str(info.value)


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    """The corruption campaign's checkpoint: its structure, its bytes, and a path for damaged copies."""
    saved = checkpoint_corruption.sample_checkpoint()
    path = tmp_path_factory.mktemp("campaign") / "damaged-checkpoint.npz"
    ta.save(saved, path)
    return saved, path.read_bytes(), path


def test_every_truncation_is_refused_naming_the_file(small_checkpoint):
    saved, data, path = small_checkpoint
    counts, failures = checkpoint_corruption.campaign(checkpoint_corruption.truncations(data), path, saved)
    assert failures == []
    assert counts["detected"] == counts["tried"] == len(data)


@settings(derandomize=True, max_examples=1500)
@given(st.data())
def test_a_flipped_bit_is_refused_naming_the_file_or_changes_nothing(small_checkpoint, data):
    saved, checkpoint, path = small_checkpoint
    offset = data.draw(st.integers(0, len(checkpoint) - 1), label="offset")
    bit = data.draw(st.integers(0, 7), label="bit")
    path.write_bytes(checkpoint_corruption.flipped(checkpoint, offset, bit))
    assert checkpoint_corruption.outcome(path, saved) in ("detected", "detected, key named", "identical")


@pytest.mark.parametrize("label, content", checkpoint_corruption.other_files(), ids=lambda x: x if str(x) == x else "")
def test_files_that_are_no_checkpoint_are_refused_naming_the_file(small_checkpoint, label, content):
    saved, _, path = small_checkpoint
    path.write_bytes(content)
    assert checkpoint_corruption.outcome(path, saved) == "detected"


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


# ----------------------------------------------------------------------------- random state


def test_the_random_state_goes_through_a_checkpoint_and_draws_go_on_identically(tmp_path, device):
    ta.manual_seed(5)
    ta.randn(3, device=device)  # the device's generator has drawn
    ta.save({"rng": ta.get_rng_state()}, tmp_path / "c")
    expected = [ta.randn(4, device=device).numpy(), ta.rand(2, 3).numpy(), ta.rand(5, device=device).numpy()]
    ta.manual_seed(9)
    ta.randn(7, device=device)
    ta.set_rng_state(ta.load(tmp_path / "c")["rng"])
    draws = [ta.randn(4, device=device).numpy(), ta.rand(2, 3).numpy(), ta.rand(5, device=device).numpy()]
    assert all(np.array_equal(a, b) for a, b in zip(draws, expected))


def test_a_generator_that_had_not_drawn_starts_again_from_the_seed():
    ta.manual_seed(3)
    state = ta.get_rng_state()
    assert state == {"seed": 3, "generators": {}}
    first = ta.randn(4).numpy()
    ta.set_rng_state(state)
    assert np.array_equal(ta.randn(4).numpy(), first)


@pytest.mark.parametrize(
    "state, words",
    [
        ({"seed": 1}, "with keys 'seed' and 'generators'"),
        ([1, 2], "got list"),
        ({"seed": "one", "generators": {}}, "'seed' must be an integer or None"),
        ({"seed": 1, "generators": {"tpu": {}}}, "unknown device 'tpu'"),
        ({"seed": 1, "generators": {"cpu": {"bit_generator": "MT19937", "state": {}}}}, "'cpu' generator's state"),
        ({"seed": 1, "generators": {"cpu": [1, 2]}}, "'cpu' generator's state"),
    ],
)
def test_set_rng_state_refuses_a_state_that_does_not_fit_and_changes_nothing(state, words):
    ta.manual_seed(4)
    ta.randn(2)
    before = ta.get_rng_state()
    expected = ta.randn(3).numpy()
    ta.set_rng_state(before)
    with pytest.raises(ValueError, match=words):
        ta.set_rng_state(state)
    assert np.array_equal(ta.randn(3).numpy(), expected)


# ----------------------------------------------------------------------------- optimizers and schedules


OPTIMIZERS = {
    "SGD": lambda groups: optim.SGD(groups, lr=0.1, momentum=0.9, nesterov=True),
    "Adam": lambda groups: optim.Adam(groups, lr=0.05, weight_decay=0.01),
    "AdamW": lambda groups: optim.AdamW(groups, lr=0.05),
}


def optimizer_run(name, values):
    params = [ta.tensor(value, requires_grad=True) for value in values]
    return params, OPTIMIZERS[name]([{"params": params[:1]}, {"params": params[1:], "lr": 0.02}])


def set_grads(params, step):
    for i, p in enumerate(params):
        p.grad = np.sin(np.arange(p.data.size, dtype=np.float32) + step + 10 * i).reshape(p.shape)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_an_optimizer_resumed_from_a_checkpoint_steps_identically(tmp_path, name):
    values = [np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)]
    params, opt = optimizer_run(name, values)
    for step in range(3):
        set_grads(params, step)
        opt.step()
    ta.save({"optimizer": opt.state_dict()}, tmp_path / "c")
    twins, restarted = optimizer_run(name, [p.numpy() for p in params])
    restarted.load_state_dict(ta.load(tmp_path / "c")["optimizer"])
    assert same(ta.load(tmp_path / "c")["optimizer"], opt.state_dict())
    for step in range(3, 6):
        set_grads(params, step)
        set_grads(twins, step)
        opt.step()
        restarted.step()
    assert all(np.array_equal(p.numpy(), t.numpy()) for p, t in zip(params, twins))


def spoiled(change):
    def spoil(state_dict):
        change(state_dict)
        return state_dict

    return spoil


@pytest.mark.parametrize(
    "spoil, error, words",
    [
        (spoiled(lambda d: d["param_groups"][0].pop("lr")), ValueError, r"group 0 lacks the hyperparameters \['lr'\]"),
        (spoiled(lambda d: d["param_groups"][1].update(lr=-1.0)), ValueError, "Invalid learning rate"),
        (spoiled(lambda d: d["state"][0].update(exp_avg=[[1.0], [2.0, 3.0]])), TypeError, "'exp_avg' for .* is a list"),
        (spoiled(lambda d: d["state"][1].update(exp_avg=np.zeros(4))), ValueError, "has shape \\(4,\\)"),
        (spoiled(lambda d: d["state"].update({7: {}})), ValueError, "state for parameter 7"),
        (spoiled(lambda d: d["param_groups"][1].update(params=[1, 2])), ValueError, "group 1 has 2 parameters"),
        (spoiled(lambda d: d.update(state=[1])), TypeError, "'state' must be a dict"),
    ],
)
def test_an_optimizer_load_that_fails_changes_nothing(tmp_path, spoil, error, words):
    params, opt = optimizer_run("Adam", [np.ones((2, 3), np.float32), np.ones(3, np.float32)])
    set_grads(params, 0)
    opt.step()
    before = opt.state_dict()
    with pytest.raises(error, match=words):
        opt.load_state_dict(spoil(opt.state_dict()))
    ta.save(opt.state_dict(), tmp_path / "after")
    assert same(ta.load(tmp_path / "after"), before)


def test_lambda_lr_state_goes_through_a_checkpoint_and_a_bad_one_changes_nothing(tmp_path):
    factor = optim.lr_scheduler.warmup_inverse_sqrt(3)
    schedule = optim.lr_scheduler.LambdaLR(optim.SGD([ta.ones(1, requires_grad=True)], lr=0.2), factor)
    for _ in range(4):
        schedule.step()
    ta.save(schedule.state_dict(), tmp_path / "c")
    resumed = optim.lr_scheduler.LambdaLR(optim.SGD([ta.ones(1, requires_grad=True)], lr=0.2), factor)
    resumed.load_state_dict(ta.load(tmp_path / "c"))
    assert resumed.state_dict() == schedule.state_dict() and resumed.last_epoch == 4
    for bad, error in [
        ({"base_lrs": [0.2, 0.1], "last_epoch": 1, "_last_lr": [0.1]}, ValueError),
        ({"base_lrs": [0.2], "last_epoch": "4", "_last_lr": [0.1]}, ValueError),
        ({"base_lrs": [0.2], "last_epoch": 4}, KeyError),
    ]:
        with pytest.raises(error):
            resumed.load_state_dict(bad)
        assert resumed.state_dict() == schedule.state_dict()


# ----------------------------------------------------------------------------- resuming training

VOCAB = 11


def training_run(device):
    """A small Transformer with dropout, AdamW and a warm-up schedule."""
    model = nn.Sequential(
        nn.Embedding(VOCAB, 16), nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2), nn.Linear(16, VOCAB)
    ).to(device)
    opt = optim.AdamW(model.parameters(), lr=0.01)
    return model, opt, optim.lr_scheduler.LambdaLR(opt, optim.lr_scheduler.warmup_inverse_sqrt(2))


def train(model, opt, schedule, batches):
    losses = []
    for tokens, targets in batches:
        opt.zero_grad()
        logits = model(tokens)  # (B, L, VOCAB)
        loss = ta.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        opt.step()
        schedule.step()
        losses.append(loss.item())
    return losses


def test_training_resumed_from_a_checkpoint_is_bit_identical_to_training_straight_through(tmp_path, device):
    N, M = 3, 3
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(N + M):
        tokens = rng.integers(0, VOCAB, (4, 6))
        batches.append((ta.tensor(tokens, device=device), ta.tensor(tokens[:, ::-1].copy(), device=device)))

    ta.manual_seed(0)
    model, opt, schedule = training_run(device)
    straight = train(model, opt, schedule, batches)
    straight_params = model.state_dict()

    ta.manual_seed(0)
    model, opt, schedule = training_run(device)
    first = train(model, opt, schedule, batches[:N])
    checkpoint = {
        "model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": schedule.state_dict(),
        "epoch": N, "rng": ta.get_rng_state(),
    }
    ta.save(checkpoint, tmp_path / "run.ckpt")
    del model, opt, schedule

    def resume(restore_rng):
        ta.manual_seed(1)  # another process: other weights, other random state
        ta.randn(5, device=device)
        model, opt, schedule = training_run(device)
        loaded = ta.load(tmp_path / "run.ckpt")
        model.load_state_dict(loaded["model"])
        opt.load_state_dict(loaded["optimizer"])
        schedule.load_state_dict(loaded["scheduler"])
        if restore_rng:
            ta.set_rng_state(loaded["rng"])
        return model, train(model, opt, schedule, batches[loaded["epoch"]:])

    model, rest = resume(restore_rng=True)
    assert first + rest == straight
    resumed_params = model.state_dict()
    assert all(np.array_equal(resumed_params[name], value) for name, value in straight_params.items())
    _, without_random_state = resume(restore_rng=False)
    assert without_random_state != rest  # the dropout masks matter: the random state is what made them equal
