"""``torch.distributed`` in one process: torch's behaviour before ``init_process_group`` where a script reaches it
(ValueError from the rank queries and the collectives), its enums and exceptions, and the clear refusals."""

import os
import types

import pytest
import torch
import torch.distributed as tdist

import tinyattn.compat as tc
import tinyattn.compat.distributed as dist
from tinyattn.compat.refusals import is_refused

# torch.distributed's names that are its own imports or submodules, not the API a single-process script calls
NOT_IN_SCOPE = {"sys", "timedelta", "torch", "traceback", "typing", "log", "logging", "algorithms", "autograd",
                "c10d_logger", "config", "constants", "device_mesh", "distributed_c10d", "logging_handlers", "rpc",
                "utils", "remote_device", "GroupName", "RankType", "get_default_backend_for_device"}


def test_every_torch_distributed_name_is_here_or_deliberately_not():
    # its submodules are out of scope (and dir() lists whichever other code has imported: fsdp, tensor…)
    names = [n for n in dir(tdist) if not n.startswith("_") and not isinstance(getattr(tdist, n), types.ModuleType)]
    missing = [n for n in names if not hasattr(dist, n) and n not in NOT_IN_SCOPE]
    assert not missing, missing


@pytest.mark.parametrize("call", [
    lambda d: d.get_rank(), lambda d: d.get_world_size(), lambda d: d.get_backend(), lambda d: d.barrier(),
    lambda d, t=None: d.all_reduce(t), lambda d: d.broadcast(None, 0), lambda d: d.new_group([0]),
    lambda d, t=None: d.all_gather([], t), lambda d: d.get_process_group_ranks(None),
])
def test_what_needs_a_process_group_raises_value_error_as_torch_does(call):
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        call(tdist) if call.__code__.co_argcount == 1 else call(tdist, torch.zeros(1))
    with pytest.raises(ValueError, match="process group"):
        call(dist) if call.__code__.co_argcount == 1 else call(dist, tc.zeros(1))


def test_the_single_process_guards_scripts_write():
    assert tc.distributed is dist
    assert dist.is_initialized() is tdist.is_initialized() is False
    assert dist.is_available() is False  # torch's CPU build says True; here no process group can ever be made
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    assert rank == 0
    assert dist.get_pg_count() == tdist.get_pg_count() == 0
    assert dist.is_torchelastic_launched() is tdist.is_torchelastic_launched()
    assert dist.group.WORLD is tdist.group.WORLD is None and dist.GroupMember.NON_GROUP_MEMBER == -100
    assert dist.default_pg_timeout == tdist.default_pg_timeout
    assert dist.get_debug_level().name == tdist.get_debug_level().name


def test_local_rank_from_the_environment_as_torch(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert dist.get_node_local_rank(fallback_rank=0) == tdist.get_node_local_rank(fallback_rank=0) == 0
    for d in (dist, tdist):
        with pytest.raises(RuntimeError, match="LOCAL_RANK"):
            d.get_node_local_rank()
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert dist.get_node_local_rank() == tdist.get_node_local_rank() == 3
    assert "LOCAL_RANK" in os.environ


def test_enums_and_errors_have_torchs_names():
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        assert str(getattr(dist.ReduceOp, name)) == str(getattr(tdist.ReduceOp, name))
        assert dist.supports_complex(getattr(dist.ReduceOp, name)) == tdist.supports_complex(
            getattr(tdist.ReduceOp, name))
    assert dist.Backend("GLOO") == tdist.Backend("GLOO") == "gloo"
    assert dist.Backend("Custom") == tdist.Backend("Custom") == "custom"
    for name in ("DistError", "DistBackendError", "DistNetworkError", "DistStoreError", "QueueEmptyError"):
        ours, theirs = getattr(dist, name), getattr(tdist, name)
        assert [c.__name__ for c in ours.__mro__] == [c.__name__ for c in theirs.__mro__]


def test_refusals_say_what_to_do_instead():
    for name in ("init_process_group", "TCPStore", "ProcessGroup", "init_device_mesh", "all_reduce"):
        assert is_refused(getattr(dist, name)), name
    with pytest.raises(NotImplementedError, match="one process.*torchrun"):
        dist.init_process_group("gloo", rank=0, world_size=1)
    with pytest.raises(NotImplementedError, match="torch.distributed.TCPStore"):
        dist.TCPStore("localhost", 29500)
    from tinyattn.compat.nn.parallel import DataParallel, DistributedDataParallel

    with pytest.raises(NotImplementedError, match="DistributedDataParallel.*model = model"):
        DistributedDataParallel(tc.nn.Linear(2, 2))
    assert is_refused(DataParallel)
    with pytest.raises(AttributeError, match="tinyattn.compat.distributed has no `fsdp`: out of scope"):
        _ = dist.fsdp
