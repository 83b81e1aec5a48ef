"""``torch.amp``: ``autocast`` and ``GradScaler``.

compat computes every operation in its tensors' own dtype: it has no mixed-precision kernels,
and NumPy no bfloat16. ``ml_dtypes``' bfloat16 was measured and does not serve: its arrays are not
NumPy floats (dtype kind ``'V'``, so every float check refuses them), reductions accumulate in
bfloat16 (the mean of 100,000 × 0.01 comes out 4e-05; torch's bfloat16 mean, accumulated in float32,
0.0100), ``einsum`` rejects them, ``matmul`` returns float32 without rounding, and elementwise
functions run 5 to 40 times slower than in float32. So ``autocast`` runs its block unchanged when it
is disabled, or when it asks for CUDA where no GPU is present (torch warns and disables itself there
too); asked to cast on the CPU it refuses, rather than compute in another precision than the one
requested. ``custom_fwd`` and ``custom_bwd`` (the decorators of an ``autograd.Function`` written
for autocast) return the function as it is: no autocast region is ever entered here.
``GradScaler`` scales the loss and unscales the gradients exactly as torch's does, skipping the
step on infinite or NaN gradients; disabled (``enabled=False``, or CUDA absent) it passes
everything through.

>>> import tinyattn.compat as torch
>>> with torch.autocast(device_type="cpu", enabled=False):
...     y = torch.ones(2) * 2
>>> scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
>>> w = torch.nn.Parameter(torch.ones(2))
>>> scaler.scale((w * 3).sum()).backward()
>>> w.grad
tensor([12., 12.])
>>> scaler.unscale_(opt := torch.optim.SGD([w], lr=0.1))
>>> w.grad
tensor([3., 3.])
"""

import warnings

from ... import backend
from ..core.devices import is_available as _cuda_is_available

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def _cuda_absent(device_type, what):
    if device_type == "cuda" and not _cuda_is_available():
        warnings.warn(f"{what}: device_type 'cuda' but CUDA is not available here; disabling", stacklevel=3)
        return True
    return False


class autocast:
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``, a context manager and decorator."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type not in ("cpu", "cuda"):
            raise RuntimeError(f"autocast: unsupported device_type {device_type!r}; expected 'cpu' or 'cuda'")
        self.device_type, self.fast_dtype = device_type, dtype
        self._enabled = bool(enabled) and not _cuda_absent(device_type, "autocast")
        if self._enabled:
            raise NotImplementedError(
                f"autocast({device_type!r}): tinyattn.compat has no mixed-precision kernels and computes in the "
                "tensors' own dtype (NumPy has no bfloat16; ml_dtypes' bfloat16 accumulates its reductions in "
                "bfloat16 and is no NumPy float); pass enabled=False (or use contextlib.nullcontext()), or cast "
                "the model with .half() / .double() yourself"
            )

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        def run(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        run.__name__, run.__doc__ = fn.__name__, fn.__doc__
        return run


class GradScaler:
    """``GradScaler(device="cuda", init_scale=2**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``: torch's dynamic loss scaling, on the gradients' arrays."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = str(device)
        self._enabled = bool(enabled) and not _cuda_absent(self._device, "GradScaler")
        self._scale, self._growth_factor, self._backoff_factor = float(init_scale), growth_factor, backoff_factor
        self._growth_interval, self._growth_tracker = growth_interval, 0
        self._per_optimizer = {}  # id(optimizer) -> {"unscaled": bool, "found_inf": bool}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """``outputs`` times the scale (a tensor, or a list or tuple of them)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide every gradient of ``optimizer``'s parameters by the scale, in place, once per step."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        inverse = 1.0 / self._scale
        found_inf = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p._grad is None:
                    continue
                p._grad *= p._grad.dtype.type(inverse)
                found_inf = found_inf or not bool(backend.namespace(p._grad).isfinite(p._grad).all())
        state.update(unscaled=True, found_inf=found_inf)

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` after unscaling, unless a gradient is infinite or NaN (then the step is skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if not state["unscaled"]:
            self.unscale_(optimizer)
        if state["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Halve the scale after a skipped step; double it after ``growth_interval`` steps in a row without."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        elif any(state["found_inf"] for state in self._per_optimizer.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor, self._backoff_factor = state_dict["growth_factor"], state_dict["backoff_factor"]
        self._growth_interval, self._growth_tracker = state_dict["growth_interval"], state_dict["_growth_tracker"]


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """torch's decorator of an ``autograd.Function``'s ``forward`` under autocast: the function as it is (autocast is
    never enabled here, so there is no region to leave or cast into). ``device_type`` is required, as in torch."""
    if fwd is None:
        return lambda fwd: custom_fwd(fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd=None, *, device_type):
    """torch's decorator of an ``autograd.Function``'s ``backward`` under autocast: the function as it is."""
    if bwd is None:
        return lambda bwd: custom_bwd(bwd, device_type=device_type)
    return bwd


def is_autocast_available(device_type):
    return device_type in ("cpu", "cuda")

