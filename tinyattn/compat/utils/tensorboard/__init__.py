"""``torch.utils.tensorboard``: ``SummaryWriter``, writing TensorBoard event files through tensorboardX.

tensorboardX (NumPy and protobuf, no TensorFlow) writes the files TensorBoard reads; this writer takes
torch's arguments (``log_dir``, ``comment``, ``purge_step``, ``max_queue``, ``flush_secs``,
``filename_suffix``) and hands its calls on, with compat or native tensors turned into NumPy arrays
first (tensorboardX recognises torch's tensors, not these). tensorboardX is imported when a writer is
made, not before (note that tensorboardX itself imports torch when torch is installed); without it the
construction raises ``ModuleNotFoundError`` naming ``pip install tensorboardX``. ``add_graph`` is refused:
it traces a torch model, which compat does not do.

>>> import os, tempfile
>>> import tinyattn.compat as torch
>>> from tinyattn.compat.utils.tensorboard import SummaryWriter
>>> with SummaryWriter(tempfile.mkdtemp()) as writer:
...     writer.add_scalar("loss", torch.tensor(0.5), global_step=1)
>>> [name.startswith("events.out.tfevents.") for name in os.listdir(writer.log_dir)]
[True]
"""

import importlib
import importlib.util
import os
import time

import numpy as np

from ....engine import Tensor as _NativeTensor
from ...refusals import refused
from ...scope import missing

__all__ = ["SummaryWriter"]

_INSTALL = "pip install tensorboardX (or pip install 'tinyattn[tensorboard]')"


def _numpy(value):
    """``value`` with every tensor in it (at any depth of lists, tuples and dicts) as a NumPy array."""
    if isinstance(value, _NativeTensor):
        return value.numpy()
    if isinstance(value, dict):
        return type(value)((k, _numpy(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_numpy(v) for v in value)
    return value


def _scalar(value):
    """A Python number from a number, a one-element tensor or array."""
    value = _numpy(value)
    return np.asarray(value).item() if isinstance(value, (np.ndarray, np.generic)) else value


class SummaryWriter:
    """torch's ``SummaryWriter``: ``add_scalar``, ``add_scalars``, ``add_histogram``, ``add_text``, ``add_hparams``,
    ``add_image``… (tensorboardX's, with tensors as arrays), ``flush``, ``close``, and ``with`` to close it."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120, filename_suffix=""):
        if importlib.util.find_spec("tensorboardX") is None:
            raise ModuleNotFoundError(f"torch.utils.tensorboard.SummaryWriter needs tensorboardX here: {_INSTALL}")
        tensorboardX = importlib.import_module("tensorboardX")
        self._file_writer_class, self._scalar_summary = tensorboardX.FileWriter, tensorboardX.summary.scalar
        self._options = {"max_queue": max_queue, "flush_secs": flush_secs, "filename_suffix": filename_suffix}
        self._writer = tensorboardX.SummaryWriter(log_dir=log_dir, comment=comment, purge_step=purge_step,
                                                  max_queue=max_queue, flush_secs=flush_secs,
                                                  filename_suffix=filename_suffix)

    @property
    def log_dir(self):
        return self._writer.logdir

    def get_logdir(self):
        return self._writer.logdir

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One scalar (a number or a one-element tensor) under ``tag`` at ``global_step``."""
        self._writer.add_scalar(tag, _scalar(scalar_value), global_step=_scalar(global_step), walltime=walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several scalars under one tag, each key in its own run, the folder ``log_dir/{main_tag}_{key}`` (torch's
        layout; tensorboardX's own nests ``main_tag/key``), so that TensorBoard draws them on one plot."""
        walltime = time.time() if walltime is None else walltime
        for key, value in tag_scalar_dict.items():
            folder = os.path.join(self.log_dir, main_tag.replace("/", "_") + "_" + key)
            writer = self._writer.all_writers.get(folder)
            if writer is None:  # kept beside tensorboardX's own, which flush() and close() reach
                writer = self._writer.all_writers[folder] = self._file_writer_class(folder, **self._options)
            writer.add_summary(self._scalar_summary(main_tag, _scalar(value)), _scalar(global_step), walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        self._writer.add_histogram(tag, np.asarray(_numpy(values)), global_step=_scalar(global_step), bins=bins,
                                   walltime=walltime, max_bins=max_bins)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        self._writer.add_text(tag, text_string, global_step=_scalar(global_step), walltime=walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """Hyperparameters and their metrics (tensorboardX's ``add_hparams``; ``hparam_domain_discrete`` is
        accepted and not written)."""
        metrics = {key: _scalar(value) for key, value in metric_dict.items()}
        self._writer.add_hparams(_numpy(hparam_dict), metrics, name=run_name, global_step=_scalar(global_step))

    add_graph = refused("torch.utils.tensorboard.SummaryWriter.add_graph",
                        "it traces a torch model, which tinyattn.compat does not do; print(model) shows its tree")

    def __getattr__(self, name):
        """tensorboardX's other ``add_*`` calls (``add_image``, ``add_figure``, ``add_embedding``…), tensors as
        arrays."""
        if not name.startswith("add_") or "_writer" not in self.__dict__:
            raise AttributeError(f"SummaryWriter has no `{name}`")
        method = getattr(self._writer, name)

        def call(*args, **kwargs):
            return method(*_numpy(args), **_numpy(kwargs))

        call.__name__ = name
        return call

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def __getattr__(name):
    raise missing(__name__, name)
