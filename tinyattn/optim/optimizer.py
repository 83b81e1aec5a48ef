"""The optimizer base class: parameter groups, per-parameter state, and their checkpoints.

As in ``torch.optim``, an optimizer holds

- ``param_groups``: a list of dicts, each with ``"params"`` (a list of tensors) and that
  group's hyperparameters (``"lr"``, ``"momentum"``, ...). A schedule changes ``lr`` here.
- ``state``: a dict from parameter tensor to that parameter's running arrays (a momentum
  buffer, Adam's moments), created lazily by the first ``step()`` that sees its gradient.
  Every array lives with its parameter: same device, same dtype.

``state_dict()`` packs both in PyTorch's layout, parameters replaced by their position
across the groups::

    {"state": {0: {"momentum_buffer": array}, ...},
     "param_groups": [{"lr": 0.1, ..., "params": [0, 1]}, ...]}

>>> import tinyattn as ta
>>> from tinyattn import optim
>>> w = ta.ones(2, requires_grad=True)
>>> b = ta.zeros(1, requires_grad=True)
>>> opt = optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
>>> [group["lr"] for group in opt.param_groups]
[0.1, 0.5]
>>> opt.state_dict()["param_groups"][1]["params"]
[1]
"""

import contextlib
import copy
import numbers

import numpy as np

from .. import backend
from ..engine import Tensor


class Optimizer:
    """Base class: subclasses set ``defaults`` and implement ``step`` and ``_check``.

    ``params`` is an iterable of tensors, or an iterable of dicts (parameter groups) each
    with ``"params"`` and any hyperparameters that override ``defaults`` for that group.

    >>> import tinyattn as ta
    >>> from tinyattn import nn, optim
    >>> model = nn.Linear(2, 2)
    >>> opt = optim.SGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 0.0}], lr=0.1)
    >>> [group["lr"] for group in opt.param_groups]
    [0.1, 0.0]
    """

    def __init__(self, params, defaults):
        if isinstance(params, Tensor):
            raise TypeError(
                "params must be an iterable of tensors or of dicts (parameter groups), got a single Tensor; "
                "pass [tensor] or model.parameters()"
            )
        self._check(defaults)
        self.defaults = defaults
        self.state = {}
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def _check(self, hyperparameters):
        """Raise ``ValueError`` for an invalid hyperparameter (a group's or the defaults)."""

    def add_param_group(self, param_group):
        """Append a group: its own ``"params"``, its options, and ``defaults`` for the rest."""
        if not isinstance(param_group, dict):
            raise TypeError(f"a parameter group must be a dict, got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError(f"a parameter group needs the key 'params'; got keys {sorted(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("parameters must come in an ordered collection (a list), not a set, whose order varies")
        params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but parameter {i} is a {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (parameter {i}, shape {p.shape})")
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a parameter group lists the same parameter twice")
        if seen & {id(p) for p in params}:
            raise ValueError("some parameters appear in more than one parameter group")
        group = {**self.defaults, **param_group, "params": params}
        self._check(group)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Forget every parameter's gradient: ``None`` (the default, as in PyTorch) or zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p._grad is None:
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    p._grad[...] = 0

    def step(self, closure=None):
        raise NotImplementedError

    # ------------------------------------------------------------------------- checkpoints

    def state_dict(self):
        """``{"state": {index: {name: value}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Arrays are NumPy copies (like ``Module.state_dict()``), so the result can be kept
        while training goes on, and loaded onto any device. It goes through ``ta.save`` and
        ``ta.load`` unchanged: the integer indices stay integers, ``betas`` stays a tuple.
        """
        index, param_groups = {}, []
        for group in self.param_groups:
            packed = copy.deepcopy({k: v for k, v in group.items() if k != "params"})
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            param_groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {
                        name: backend.to_numpy(value) if backend.is_array(value) else copy.deepcopy(value)
                        for name, value in self.state[p].items()
                    }
        return {"state": state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Take hyperparameters and state from ``state_dict`` (as made by ``state_dict()``).

        The groups must have the same sizes as this optimizer's and every hyperparameter of
        ``defaults``, with valid values; each state entry is an array of its parameter's shape
        or a number. Otherwise a ``ValueError`` (``TypeError`` for a value of the wrong kind)
        says what differs, and nothing is changed. Arrays are copied onto each parameter's
        device; floating-point ones are cast to its dtype.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"optimizer state_dict must be a dict, got {type(state_dict).__name__}")
        for key in ("state", "param_groups"):
            if key not in state_dict:
                raise KeyError(f"optimizer state_dict has no {key!r} entry; got keys {sorted(state_dict)}")
        saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        if not isinstance(saved_groups, (list, tuple)) or not all(isinstance(g, dict) for g in saved_groups):
            raise TypeError("optimizer state_dict's 'param_groups' must be a list of dicts")
        if not isinstance(saved_state, dict) or not all(isinstance(v, dict) for v in saved_state.values()):
            raise TypeError("optimizer state_dict's 'state' must be a dict of parameter index -> dict of values")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} parameter groups, "
                f"this optimizer has {len(self.param_groups)}"
            )
        params, param_groups = {}, []
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            indices = saved.get("params")
            if not isinstance(indices, (list, tuple)) or len(indices) != len(group["params"]):
                count = len(indices) if isinstance(indices, (list, tuple)) else repr(indices)
                raise ValueError(
                    f"loaded state dict's parameter group {i} has {count} parameters, "
                    f"this optimizer's has {len(group['params'])}"
                )
            params.update(zip(indices, group["params"]))
            missing = sorted(set(self.defaults) - set(saved))
            if missing:
                raise ValueError(f"loaded state dict's parameter group {i} lacks the hyperparameters {missing}")
            options = copy.deepcopy({k: v for k, v in saved.items() if k != "params"})
            loaded = {**options, "params": group["params"]}
            self._check(loaded)
            param_groups.append(loaded)
        state = {}
        for index, values in saved_state.items():
            if index not in params:
                raise ValueError(
                    f"loaded state dict has state for parameter {index!r}, "
                    f"but its groups list parameters {sorted(params, key=repr)}"
                )
            param = params[index]
            state[param] = {name: self._loaded_state_value(value, param, index, name) for name, value in values.items()}
        self.state, self.param_groups = state, param_groups

    def _loaded_state_value(self, value, param, index, name):
        """One loaded state entry, checked and put on ``param``'s device: an array of the parameter's shape or a
        number (an optimizer whose state holds other shapes says so here)."""
        return _state_value(value, param, index, name)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {key}: {group[key]}" for key in sorted(group) if key != "params"]
        return "\n".join(lines) + "\n)"


def non_negative(value, what, arg):
    """Refuse a hyperparameter that is not a real number ``>= 0`` (NaN included), in PyTorch's words."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"Invalid {what}: {value!r} (expected {arg}, a real number >= 0)")
    if not value >= 0.0:
        raise ValueError(f"Invalid {what}: {value} (expected {arg} >= 0)")


def grad_of(p):
    """``p.grad``, which must have ``p``'s shape: an optimizer never broadcasts a gradient over its parameter, and
    updates floating-point parameters only (an integer one cannot take a fractional step)."""
    if p._data.dtype.kind != "f" or p._grad.dtype.kind != "f":
        raise TypeError(f"optimizer step: a parameter of dtype {p._data.dtype} has a .grad of dtype {p._grad.dtype}; "
                        "an optimizer updates floating-point parameters with floating-point gradients")
    if p._grad.shape != p._data.shape:
        raise RuntimeError(f"optimizer step: a parameter of shape {p.shape} has a .grad of shape "
                           f"{tuple(p.grad.shape)}; a gradient must have its parameter's shape")
    return p._grad


def _state_value(value, param, index, name, shape=None):
    """A copy of one loaded state entry on ``param``'s device (and dtype, if floating-point), of ``shape`` (the
    parameter's by default) if it is an array."""
    if isinstance(value, Tensor):
        value = value._data
    if isinstance(value, np.generic):  # a NumPy scalar step would make the update's scalars float64
        return value.item()
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if not backend.is_array(value):
        raise TypeError(
            f"loaded state dict's {name!r} for parameter {index} is a {type(value).__name__}; "
            "expected an array or a number"
        )
    shape = param.shape if shape is None else tuple(shape)
    if tuple(value.shape) != shape:
        raise ValueError(
            f"loaded state dict's {name!r} for parameter {index} has shape {tuple(value.shape)}, "
            f"expected {shape}" + (" (the parameter's)" if shape == param.shape else "")
        )
    dtype = param.dtype if value.dtype.kind == "f" else value.dtype
    return backend.to_device(value, param.device).astype(dtype)  # astype copies


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """Inside the ``with`` block, ``optimizer`` works on other parameters and state; on leaving, its own come back.

    ``swapin_parameters`` maps names to tensors, in the order of the optimizer's parameters across its groups
    (``model.named_parameters()``'s, usually); ``swapin_optim_state`` is shaped as ``optimizer.state_dict()``:
    its ``"state"`` by parameter index, its ``"param_groups"`` with each group's options and indices. The arrays
    of that state are used as they are, so a ``step()`` inside updates them (and the swapped-in parameters) in
    place; the live parameters, state and options are not touched.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.ones(2, requires_grad=True)
    >>> opt = optim.SGD([w], lr=0.5, momentum=0.9)
    >>> w.grad = ta.ones(2).data
    >>> opt.step()
    >>> other = ta.zeros(2, requires_grad=True)
    >>> other.grad = ta.ones(2).data
    >>> saved = opt.state_dict()
    >>> with optim.swap_in_optimizer_params_and_state(opt, {"w": other}, saved):
    ...     opt.step()
    >>> other.tolist(), w.tolist(), saved["state"][0]["momentum_buffer"].tolist()
    ([-0.949999988079071, -0.949999988079071], [0.5, 0.5], [1.899999976158142, 1.899999976158142])
    """
    params = list(swapin_parameters.values())
    counts = [len(group["params"]) for group in optimizer.param_groups]
    saved_groups = swapin_optim_state["param_groups"]
    if len(params) != sum(counts) or [len(g["params"]) for g in saved_groups] != counts:
        raise ValueError(f"swap_in_optimizer_params_and_state: the optimizer's groups hold {counts} parameters; got "
                         f"{len(params)} parameters and a state whose groups hold "
                         f"{[len(g['params']) for g in saved_groups]}")
    live_groups = [dict(group) for group in optimizer.param_groups]
    live_state = optimizer.state
    state, start = {}, 0
    for group, saved, count in zip(optimizer.param_groups, saved_groups, counts):
        group.update({key: value for key, value in saved.items() if key != "params"})
        group["params"] = params[start:start + count]
        for index, p in zip(saved["params"], group["params"]):
            if index in swapin_optim_state["state"]:
                state[p] = swapin_optim_state["state"][index]
        start += count
    optimizer.state = state
    try:
        yield
    finally:
        for group, live in zip(optimizer.param_groups, live_groups):
            group.clear()
            group.update(live)
        optimizer.state = live_state
