"""Floor 1: forward mode's step in every operation: an output's tangents from its inputs' (``with_tangents``).

While a forward-mode level is open in the calling thread (``autograd.forward_ad.dual_level``, ``ta.func.jvp``:
``modes.current().dual_levels``), ``Function.apply`` hands each result here, and the operation's JVP rule,
``cls.jvp(tangents, inputs, out, **options)``, gives its tangent at each level at which an input has one.
A dual tensor (``make_dual``'s) is a view of its primal for reverse mode, but a tensor of its own in forward
mode (``DualStep``).
"""

from . import modes


def transforming():
    """Whether ``ta.func.vmap`` runs or a forward-mode level is open: every operation then goes through its
    batching and JVP rules (an operation without them cannot take part)."""
    mode = modes.current()
    return mode.batching is not None or bool(mode.dual_levels)


def with_tangents(cls, inputs, result, options):
    """``result`` with its tangent at every open level at which an input has one (forward mode): the
    operation's JVP rule, ``cls.jvp(tangents, inputs, result, **options)``, on tensors. While the rule for a
    level runs, operations see only the levels below it, so a nested level's tangents never mix into an
    outer one's (the perturbation confusion), while an outer level's flow through the rule's own operations."""
    mode = modes.current()
    levels = sorted({level for t in inputs if t._tangents for level in t._tangents
                     if level < mode.seen_level and level in mode.dual_levels})
    for level in levels:
        tangents = [t._tangents.get(level) if t._tangents else None for t in inputs]
        jvp = getattr(cls, "jvp", None)
        if jvp is None:
            raise RuntimeError(f"{cls.__name__} has no forward-mode rule (jvp): it cannot carry a tangent; every "
                               "operation of the reference definitions has one")
        seen = modes.change(seen_level=level)
        try:
            tangent = jvp(tangents, inputs, result, **options)
        finally:
            modes.change(**seen)
        if tangent is None:
            continue
        if tangent.shape != result.shape:
            tangent = tangent.expand(*result.shape)
        if tangent.dtype != result.dtype:
            tangent = tangent._to_dtype(result.dtype)
        result._tangents = {**(result._tangents or {}), level: tangent}
    if result._tangents and result._ctx is not None:  # for a backward that reads the output (``graph.output_of``);
        result._ctx.__dict__.setdefault("output_tangents", result._tangents)  # under vmap: the physical call's, first
    return result


class DualStep:
    """A step of a view's record (``Tensor._view``: its base and the view operations from it) that marks where
    ``make_dual`` made a dual tensor. As in PyTorch, a dual is a view of its primal for reverse mode (a write
    through it reaches the primal's graph) but a tensor of its own in forward mode: a write through a view of the
    dual rewrites the dual's tangent, never its primal's (``inplace``). Replayed on an array or a tensor, the step
    is the identity."""

    @staticmethod
    def apply(x, dual, level):
        return x

    def forward(self, array, dual, level):
        return array


def mark_dual(dual, level):
    """Record in ``dual``'s view record (when it is a view of its primal) that it is a dual at ``level``."""
    if dual._view is not None:
        base, steps, version = dual._view
        dual._view = (base, steps + ((DualStep, {"dual": dual, "level": level}),), version)


def dual_step(steps):
    """``(dual, level, the steps from the dual)`` for the last ``DualStep`` of a view's steps, or ``None``."""
    for i in range(len(steps) - 1, -1, -1):
        cls, options = steps[i]
        if cls is DualStep:
            return options["dual"], options["level"], steps[i + 1:]
    return None
