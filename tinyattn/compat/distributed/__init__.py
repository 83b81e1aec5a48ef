"""``torch.distributed``: what a single-process script asks of it, and a clear refusal of the rest.

tinyattn runs in one process, with no communication backend (gloo, NCCL, MPI): there is no process
group to make. So ``is_available()`` is ``False``, as torch reports on a build without distributed
support (a state scripts already guard against), ``is_initialized()`` is ``False``, and the calls that
need a process group raise what torch raises before ``init_process_group``: ``get_rank()``,
``get_world_size()``, ``barrier()``, ``all_reduce(t)``… raise ``ValueError``, so the usual guard
``dist.get_rank() if dist.is_initialized() else 0`` runs as in torch. ``init_process_group``, the
stores and the process-group classes are refused, naming what to do instead (run the script as one
process, without ``torchrun``). The enums and exceptions scripts name (``ReduceOp``, ``Backend``,
``group.WORLD``, ``DistError``…) are here.

>>> import tinyattn.compat as torch
>>> import tinyattn.compat.distributed as dist
>>> dist.is_available(), dist.is_initialized()
(False, False)
>>> rank = dist.get_rank() if dist.is_initialized() else 0
>>> dist.get_rank()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Default process group has not been initialized, please make sure to call init_process_group. ...
>>> dist.ReduceOp.SUM, dist.Backend("GLOO")
(<RedOpType.SUM: 0>, 'gloo')
"""

import datetime
import enum
import os

from ..refusals import refused
from ..scope import missing

__all__ = [
    "is_available", "is_initialized", "is_torchelastic_launched", "is_nccl_available", "is_gloo_available",
    "is_mpi_available", "is_ucc_available", "is_xccl_available", "is_backend_available",
    "get_rank", "get_world_size", "get_backend", "get_backend_config", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "get_node_local_rank", "get_pg_count", "get_debug_level", "set_debug_level",
    "set_debug_level_from_env", "destroy_process_group", "supports_complex", "default_pg_timeout",
    "ReduceOp", "reduce_op", "Backend", "DebugLevel", "group", "GroupMember",
    "DistError", "DistBackendError", "DistNetworkError", "DistStoreError", "QueueEmptyError",
    "init_process_group", "init_device_mesh", "new_group", "new_subgroups", "new_subgroups_by_enumeration",
    "split_group", "shrink_group", "monitored_barrier", "breakpoint", "rendezvous", "register_rendezvous_handler",
    "barrier", "broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "all_gather_object",
    "all_gather_coalesced", "all_gather_single", "all_reduce_coalesced", "gather", "gather_object", "scatter",
    "scatter_object_list", "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all",
    "all_to_all_single", "send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list",
    "recv_object_list", "broadcast_object_list", "record_comm",
    "Store", "TCPStore", "FileStore", "HashStore", "PrefixStore", "ProcessGroup", "ProcessGroupGloo", "Work",
    "P2POp", "Reducer", "Logger", "GradBucket", "DeviceMesh", "BackendConfig", "BuiltinCommHookType",
    "AllreduceOptions", "AllreduceCoalescedOptions", "AllToAllOptions", "BarrierOptions", "BroadcastOptions",
    "GatherOptions", "ReduceOptions", "ReduceScatterOptions", "ScatterOptions",
]

_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call init_process_group. "
                    "(tinyattn.compat runs one process: guard the call with dist.is_initialized())")
_ONE_PROCESS = ("tinyattn.compat runs one process, with no communication backend (gloo, NCCL, MPI); run the "
                "script as a single process (python script.py, not torchrun) and skip the call when "
                "dist.is_initialized() is False")


# ----------------------------------------------------------------------------- what holds without a process group


def is_available():
    """``False``: no communication backend here (torch's answer on a build without distributed support)."""
    return False


def is_initialized():
    """``False``: no default process group is ever made here."""
    return False


def is_torchelastic_launched():
    """Whether the script was started by ``torchrun`` (torch's test: ``TORCHELASTIC_RUN_ID`` is set)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def is_nccl_available():
    return False


def is_gloo_available():
    return False


def is_mpi_available():
    return False


def is_ucc_available():
    return False


def is_xccl_available():
    return False


def is_backend_available(backend):
    return False


def get_pg_count():
    """The number of process groups made: 0."""
    return 0


def _not_initialized(*args, **kwargs):
    raise ValueError(_NOT_INITIALIZED)


def get_rank(group=None):
    """Raises ``ValueError``, as torch's does before ``init_process_group`` (always, here)."""
    _not_initialized()


def get_world_size(group=None):
    """Raises ``ValueError``, as torch's does before ``init_process_group`` (always, here)."""
    _not_initialized()


def get_backend(group=None):
    _not_initialized()


def get_backend_config(group=None):
    _not_initialized()


def get_global_rank(group, group_rank):
    _not_initialized()


def get_group_rank(group, global_rank):
    _not_initialized()


def get_process_group_ranks(group):
    _not_initialized()


def destroy_process_group(group=None):
    """torch's ``AssertionError``: there is no process group to destroy."""
    raise AssertionError("Process group cannot be None")


def get_node_local_rank(fallback_rank=None):
    """``LOCAL_RANK`` from the environment, else ``fallback_rank``; neither raises ``RuntimeError``, as torch's."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                       "`get_node_local_rank` to work, assuming you are not running in a multi-device context and "
                       "want the code to run locally instead.")


default_pg_timeout = datetime.timedelta(minutes=30)


class ReduceOp(enum.Enum):
    """The reductions a collective applies (the names scripts pass: ``dist.ReduceOp.SUM``…)."""

    SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM, UNUSED = range(10)

    def __repr__(self):
        return f"<RedOpType.{self.name}: {self.value}>"

    def __str__(self):
        return f"RedOpType.{self.name}"


reduce_op = ReduceOp


def supports_complex(reduceOp):
    """Whether a reduction is defined on complex tensors (not the ordering ones), as torch's."""
    return reduceOp not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT, ReduceOp.BAND, ReduceOp.BOR,
                            ReduceOp.BXOR)


class Backend(str):
    """A backend's name, lower-cased (``Backend("GLOO") == "gloo"``; another name stays itself, as a custom
    backend's does in torch); none is available here."""

    UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE = "undefined", "gloo", "nccl", "xccl", "ucc", "mpi", "fake"
    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE]

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: {type(name).__name__}")
        return str.__new__(cls, name.lower())


class DebugLevel(enum.Enum):
    OFF, INFO, DETAIL = range(3)


_DEBUG = [DebugLevel.OFF]


def get_debug_level():
    return _DEBUG[0]


def set_debug_level(level):
    _DEBUG[0] = DebugLevel(level) if not isinstance(level, DebugLevel) else level


def set_debug_level_from_env():
    """``TORCH_DISTRIBUTED_DEBUG`` (``OFF``, ``INFO`` or ``DETAIL``) as the debug level."""
    value = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").upper()
    if value not in DebugLevel.__members__:
        raise ValueError(f"TORCH_DISTRIBUTED_DEBUG: expected OFF, INFO or DETAIL, got {value!r}")
    _DEBUG[0] = DebugLevel[value]


class group:
    """``group.WORLD``: the default group, ``None`` until one is made (never, here)."""

    WORLD = None


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = -100


class DistError(RuntimeError):
    """torch's base of the errors of distributed calls (scripts catch it)."""


class DistBackendError(DistError):
    pass


class DistStoreError(DistError):
    pass


class DistNetworkError(DistError):
    pass


class QueueEmptyError(DistStoreError):
    pass


# ----------------------------------------------------------------------------- refused: no second process


def _refuse(name, error=NotImplementedError, why=_ONE_PROCESS):
    return refused(f"torch.distributed.{name}", why, error=error)


init_process_group = _refuse("init_process_group")
init_device_mesh = _refuse("init_device_mesh")
rendezvous = _refuse("rendezvous")
register_rendezvous_handler = _refuse("register_rendezvous_handler")
breakpoint = _refuse("breakpoint")
record_comm = _refuse("record_comm")

# the collectives and group constructors: torch raises ValueError before init_process_group, and so do these
_COLLECTIVE_WHY = "no process group exists (" + _ONE_PROCESS + ")"
for _name in ("new_group", "new_subgroups", "new_subgroups_by_enumeration", "split_group", "shrink_group",
              "monitored_barrier", "barrier", "broadcast", "all_reduce", "reduce", "all_gather",
              "all_gather_into_tensor", "all_gather_object", "all_gather_coalesced", "all_gather_single",
              "all_reduce_coalesced", "gather", "gather_object", "scatter", "scatter_object_list", "reduce_scatter",
              "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all", "all_to_all_single", "send", "recv",
              "isend", "irecv", "batch_isend_irecv", "send_object_list", "recv_object_list",
              "broadcast_object_list"):
    globals()[_name] = _refuse(_name, ValueError, _COLLECTIVE_WHY)

# the stores, process groups and their options: classes refused at construction
for _name in ("Store", "TCPStore", "FileStore", "HashStore", "PrefixStore", "ProcessGroup", "ProcessGroupGloo",
              "Work", "P2POp", "Reducer", "Logger", "GradBucket", "DeviceMesh", "BackendConfig",
              "BuiltinCommHookType", "AllreduceOptions", "AllreduceCoalescedOptions", "AllToAllOptions",
              "BarrierOptions", "BroadcastOptions", "GatherOptions", "ReduceOptions", "ReduceScatterOptions",
              "ScatterOptions"):
    globals()[_name] = _refuse(_name)


def __getattr__(name):
    raise missing(__name__, name)
