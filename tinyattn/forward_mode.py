"""Floor 1: forward mode's step in every operation: an output's tangents from its inputs' (``with_tangents``).

While a forward-mode level is open in the calling thread (``autograd.forward_ad.dual_level``, ``ta.func.jvp``:
``modes.current().dual_levels``), ``Function.apply`` hands each result here, and the operation's JVP rule,
``cls.jvp(tangents, inputs, out, **options)``, gives its tangent at each level at which an input has one.
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
