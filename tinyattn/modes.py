"""Floor 1: the modes of the calling thread, in one record.

Grad mode, inference mode, anomaly mode, the open forward-mode levels and a running ``vmap`` change what an
operation does. PyTorch keeps such modes per thread, so that a thread serving inference under ``no_grad`` leaves
a training thread's graph alone; so does tinyattn. The modes are the fields of one ``Modes`` record, held in a
``contextvars.ContextVar``: each thread (and each ``contextvars.Context``) sees its own, and a new thread starts
from the defaults (gradients on, no transform). A record is never changed in place: ``change`` puts a new one in
the calling thread's place and gives back the fields it replaced, so that whoever set a mode can put back exactly
what it found.

>>> from tinyattn import modes
>>> modes.current().grad_enabled
True
>>> previous = modes.change(grad_enabled=False)
>>> previous, modes.current().grad_enabled
({'grad_enabled': True}, False)
>>> _ = modes.change(**previous)
>>> modes.current().grad_enabled
True
"""

import contextvars
import itertools
import math


class Modes:
    """The calling thread's modes (read them with ``current()``; change them with ``change``).

    - ``grad_enabled``: operations record the graph (``no_grad``, ``enable_grad``, ``set_grad_enabled``);
    - ``inference``: ``inference_mode`` is on;
    - ``anomaly``: ``detect_anomaly``: ``False``, ``True`` (NaN checks and creation lines) or ``"lines"`` (lines only);
    - ``dual_levels``: the forward-mode levels open (``autograd.forward_ad.dual_level``, ``ta.func.jvp``),
      innermost last, each numbered by ``new_level()``; ``forward_ad_level``: the one ``forward_ad`` opened;
    - ``seen_level``: the tangents operations propagate: those of the levels below it (while a level's JVP
      rule runs, its own tangents are not seen);
    - ``batching``: while ``ta.func.vmap`` runs, its batching rules, ``(cls, inputs, options) -> result or None``;
    - ``per_example``: inside ``vmap(randomness="different")``, ``(draw, shape) -> a batched tensor of draws``;
    - ``randomness``: inside ``vmap``, its ``randomness`` (``"error"``, ``"different"``, ``"same"``);
    - ``vmap_levels``: the ``vmap`` levels open, outermost first, and ``vmap_sizes``, each one's batch size;
    - ``transform_depth``: how many differentiating ``ta.func`` transforms run (inside one, gradients keep their
      graph for the others).
    """

    def __init__(self, grad_enabled=True, inference=False, anomaly=False, dual_levels=(), forward_ad_level=None,
                 seen_level=math.inf, batching=None, per_example=None, randomness=None, vmap_levels=(),
                 vmap_sizes=None, transform_depth=0):
        self.grad_enabled, self.inference, self.anomaly = grad_enabled, inference, anomaly
        self.dual_levels, self.forward_ad_level, self.seen_level = dual_levels, forward_ad_level, seen_level
        self.batching, self.per_example, self.randomness = batching, per_example, randomness
        self.vmap_levels, self.vmap_sizes = vmap_levels, {} if vmap_sizes is None else vmap_sizes
        self.transform_depth = transform_depth

    def __repr__(self):
        return "Modes(" + ", ".join(f"{name}={value!r}" for name, value in vars(self).items()) + ")"


#: ``new_level()``: the number of a forward-mode or ``vmap`` level being opened, never given before (in any thread),
#: so that a tensor's tangent or batch of a closed level never looks current, and a nested level's is larger.
new_level = itertools.count(1).__next__

_CURRENT = contextvars.ContextVar("tinyattn.modes", default=Modes())  # noqa: B039 (never written to: change)

#: ``current()``: the calling thread's ``Modes`` (read it; never write to it: ``change``).
current = _CURRENT.get


def change(**fields):
    """Give the calling thread a record with ``fields`` changed; return the fields it replaced, as a dict
    (``change(**returned)`` puts them back, and leaves any other field as it then is)."""
    now = vars(_CURRENT.get())
    if not fields.keys() <= now.keys():
        raise TypeError(f"modes.change: no mode named {', '.join(sorted(fields.keys() - now.keys()))}; "
                        f"the modes are {', '.join(now)}")
    new = object.__new__(Modes)
    new.__dict__ = {**now, **fields}
    _CURRENT.set(new)
    return {name: now[name] for name in fields}


def inside_transform():
    """Whether a ``ta.func`` transform (``grad``, ``vjp``, ``jacrev``, ``vmap``…) runs in the calling thread: autograd's
    own bookkeeping on a tensor (``requires_grad_``, ``retain_grad``) is then refused, as ``torch.func`` refuses it."""
    mode = _CURRENT.get()
    return mode.transform_depth > 0 or bool(mode.vmap_levels)
