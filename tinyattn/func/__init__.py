"""Function transforms, as ``torch.func`` has them: ``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``,
``jacfwd``, ``hessian``, ``vmap`` and ``functional_call``, composable to any depth.

Each transform takes a function of tensors and returns another:

- ``grad(f)(x)`` is ∂f/∂x for a scalar ``f``: reverse mode (``ta.autograd.grad``) on a fresh alias of ``x``;
- ``vjp(f, x)`` returns ``f(x)`` and the function ``u ↦ uᵀ J``; ``jvp(f, (x,), (v,))`` returns ``f(x)`` and
  ``J v`` by forward mode (``ta.autograd.forward_ad``);
- ``jacrev`` and ``jacfwd`` are ``vmap`` of ``vjp`` over the rows of an identity, or of ``jvp`` over its
  columns; ``hessian(f)`` is ``jacfwd(jacrev(f))``;
- ``vmap(f)(xs)`` runs ``f`` once on the whole batch, with each primitive's batching rule
  (``func.batching``), as if on each example alone.

Nesting works because every transform records what the one around it needs: a gradient is taken with
``create_graph`` when another transform (or an outer graph) will differentiate it; each forward-mode call
opens its own level, so an inner ``jvp`` never mixes its tangents into an outer one's; each ``vmap`` its own
batch level. Inside ``vmap`` and forward mode a compiled module runs its reference definitions.

>>> import tinyattn as ta
>>> from tinyattn.func import grad, vmap
>>> x = ta.tensor([0.0, 1.0, 2.0], dtype=ta.float64)
>>> vmap(grad(lambda t: t.tanh()))(x)                       # tanh' = 1 - tanh², example by example
tensor([1.        , 0.41997434, 0.07065082], dtype=float64)
"""

import collections
import functools

import numpy as np

from .. import backend, graph, modes, ops
from ..engine import Tensor
from . import batching
from .batching import BatchedTensor, batched_class, levels_of

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "functional_call"]

# ----------------------------------------------------------------------------- trees of tensors


def _flatten(tree):
    """The tensors of a nested tuple/list/dict (leaves in order) and a function that rebuilds the tree."""
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(t) for t in tree]
        leaves = [leaf for part, _ in parts for leaf in part]

        def rebuild(values):
            values, out = list(values), []
            for part, build in parts:
                out.append(build(values[:len(part)]))
                values = values[len(part):]
            return type(tree)(out) if not hasattr(tree, "_fields") else type(tree)(*out)
        return leaves, rebuild
    if isinstance(tree, dict):
        keys, kind = list(tree), collections.OrderedDict if isinstance(tree, collections.OrderedDict) else dict
        leaves, rebuild_values = _flatten([tree[k] for k in keys])
        return leaves, lambda values: kind(zip(keys, rebuild_values(values)))
    return [tree], lambda values: values[0]


def _broadcast(dims, tree):
    """``dims`` (``vmap``'s ``in_dims`` or ``out_dims``) as one entry per leaf of ``tree``, as ``torch.func`` reads
    them: an int or None stands for the whole subtree in its place; a tuple, list or dict must stand where ``tree``
    has one of the same kind and length (the same keys). ``None`` where they do not match."""
    if not isinstance(dims, (tuple, list, dict)):
        return [dims] * len(_flatten(tree)[0])
    kind = dict if isinstance(dims, dict) else list if isinstance(dims, list) else tuple
    if not isinstance(tree, kind) or len(tree) != len(dims) or (kind is dict and dims.keys() != tree.keys()):
        return None
    flat = []
    for dim, subtree in ([(dims[k], tree[k]) for k in tree] if kind is dict else zip(dims, tree)):
        part = _broadcast(dim, subtree)
        if part is None:
            return None
        flat += part
    return flat


def _structure(tree):
    """``tree`` written with ``*`` for each leaf, for error messages: ``([*, *], {'a': *})``."""
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{key!r}: {_structure(value)}" for key, value in tree.items()) + "}"
    if isinstance(tree, (tuple, list)):
        inner = ", ".join(_structure(t) for t in tree) + ("," if isinstance(tree, tuple) and len(tree) == 1 else "")
        return f"[{inner}]" if isinstance(tree, list) else f"({inner})"
    return "*"


class _transform:
    """Inside: one more differentiating transform running (the thread's ``transform_depth``: ``tinyattn.modes``),
    which records its own graph whatever the caller's grad mode, as ``torch.func``'s do; ``outer_grad_enabled``
    is the caller's. Under ``no_grad`` (outside every transform, or inside one) the caller records nothing of what
    runs here: what the transform gives is a constant to it and to every transform around it (``_outside``), as a
    ``torch.func`` level entered under ``no_grad`` hands its operations down with grad mode off."""

    def __enter__(self):
        now = modes.current()
        self.outer_grad_enabled = now.grad_enabled
        self._previous = modes.change(transform_depth=now.transform_depth + 1, grad_enabled=True)
        return self

    def __exit__(self, *exc):
        modes.change(**self._previous)


def _keeps_graph(tensors, transform):
    """Whether a gradient taken now must carry its graph: a forward-mode level is open (its tangents go through
    the backward's operations), or the caller records (its grad mode on: ``transform.outer_grad_enabled``) and
    another differentiating transform runs around this one, or an input is in a graph it may differentiate."""
    mode = modes.current()
    return bool(mode.dual_levels) or transform.outer_grad_enabled and (
        mode.transform_depth > 1 or any(t.requires_grad for t in tensors))


def _outside(tree, transform):
    """What a transform gives (a tensor or a tree of them) as its caller gets it: cut from the graph where the
    caller records none, its forward-mode tangents kept (grad mode does not stop forward mode)."""
    if transform.outer_grad_enabled:
        return tree
    leaves, rebuild = _flatten(tree)
    constants = []
    for t in leaves:
        if isinstance(t, Tensor):
            tangents, t = batching.open_tangents(t), t.detach()
            t._tangents = tangents
        constants.append(t)
    return rebuild(constants)


def _aux(output, name):
    """``(output, aux)`` of a function called with ``has_aux=True``: a pair, its aux a tensor or a tree of them."""
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{name}(has_aux=True): expected the function to return a pair (output, aux), got "
                           + (f"a tuple of {len(output)}" if isinstance(output, tuple) else type(output).__name__))
    output, aux = output
    for leaf in _flatten(aux)[0]:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{name}(has_aux=True): expected the aux to be a tensor or a tuple, list or dict of "
                               f"tensors, got {_structure(aux)} holding a value of type {type(leaf).__name__}")
    return output, aux


# ----------------------------------------------------------------------------- reverse mode


def _differentiable(x, name):
    """A fresh alias of ``x`` that requires a gradient, in ``x``'s graph (so an outer transform still reaches
    ``x``), batched like every open ``vmap`` level (a per-example gradient even of an unbatched ``x``)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a tensor to differentiate, got {type(x).__name__}")
    if x.dtype.kind not in "fc":
        raise TypeError(f"{name}: cannot differentiate with respect to a tensor of dtype {x.dtype}")
    levels = modes.current().vmap_levels
    missing = tuple(level for level in levels if level not in levels_of(x))
    if missing:  # per example: the batch axes it lacks, made real
        x = _lift(x, levels)
    alias = ops.reshape(x, x.shape)  # a node of x's graph when x requires grad
    if not alias.requires_grad:  # a leaf of its own, with x's tangents (forward mode around this transform)
        alias = Tensor._wrap(x._data, x)
        alias.requires_grad, alias._tangents = True, x._tangents
    return alias


def _lift(x, levels):
    """``x`` batched at ``levels``: its array broadcast over the batch axes it lacks (a view, in the graph)."""
    physical = batching.physical(x, levels)
    sizes = tuple(modes.current().vmap_sizes[level] for level in levels)
    out = batching.plain(ops.expand, physical, *(sizes + physical.shape[len(levels):]))
    out.__class__ = batched_class(levels)
    tangents = batching.open_tangents(x)
    if tangents:  # forward mode around: the tangents lifted alike
        out._tangents = {level: _lift(t, levels) for level, t in tangents.items()}
    return out


def _gradients(outputs, cotangents, inputs, create_graph, retain_graph=None):
    """The gradients of ``outputs`` (each given its cotangent, of its shape) with respect to ``inputs``, as
    tensors of their kinds; zeros for an input the outputs do not reach. The walk runs on the graph's
    physical arrays (``batching.unwrap``): a gradient leaves it batched again as its input is."""
    roots = []
    for out, ct in zip(outputs, cotangents):
        if not out.requires_grad:
            continue
        ct = ct if isinstance(ct, Tensor) else Tensor._wrap(ct, out)
        if levels_of(out) and not levels_of(ct):
            ct = ct + _zeros_like(out)  # one cotangent for every example: batched as the output is
        if levels_of(ct):
            ct = batching.unwrap(ct, levels_of(out))
        roots.append((out, ct if create_graph else ct._data))
    retain_graph = create_graph if retain_graph is None else retain_graph
    taken = graph.walk(roots, retain_graph, create_graph, inputs) if roots else {}
    grads = []
    for t in inputs:
        g = taken.get(id(t))
        if g is None:
            g = Tensor._wrap(backend.namespace(t._data).zeros(t._data.shape, t.dtype), t)
        elif not isinstance(g, Tensor):
            g = Tensor._wrap(g, t)
        elif levels_of(t) or levels_of(g):
            g = batching.rewrap(g, levels_of(t))
        grads.append(g)
    return grads


def _zeros_like(t):
    """Zeros of ``t``'s shape and kind (batched as it is): a tangent or cotangent that is nothing (``t * 0`` would be
    NaN where ``t`` is infinite)."""
    return Tensor._wrap(backend.namespace(t._data).zeros(t._data.shape, t.dtype), t)


def _argnums(argnums, count, name):
    """``argnums`` (an int, or a tuple of distinct ints) as non-negative positions among ``count`` arguments."""
    if not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"{name}: argnums must be an int or a tuple of ints, got {argnums!r} "
                           f"({type(argnums).__name__})")
    numbers = (argnums,) if isinstance(argnums, int) else argnums
    if not numbers:
        raise RuntimeError(f"{name}: argnums must not be empty")
    for n in numbers:
        if not isinstance(n, int) or not -count <= n < count:
            raise RuntimeError(f"{name}: argnums {argnums!r}: expected ints in [{-count}, {count - 1}] for a function "
                               f"of {count} positional arguments, got {n!r}")
    positions = tuple(n % count for n in numbers)
    if len(set(positions)) != len(positions):
        raise RuntimeError(f"{name}: argnums {argnums!r} must be unique: as positions among {count} arguments they "
                           f"are {positions}")
    return positions


def grad_and_value(func, argnums=0, has_aux=False):
    """``(∂func/∂args[argnums], func(*args))`` for a ``func`` that returns one number (a one-element tensor),
    or ``(number, aux)`` with ``has_aux=True``. ``argnums``: an int, or a tuple (then a tuple of gradients);
    an argument may be a tensor or a tree (tuple, list, dict) of tensors, and its gradient is the same tree.

    >>> import tinyattn as ta
    >>> from tinyattn.func import grad_and_value
    >>> g, value = grad_and_value(lambda x: (x ** 2).sum())(ta.tensor([1.0, 3.0]))
    >>> g, value.item()
    (tensor([2., 6.]), 10.0)
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        numbers = _argnums(argnums, len(args), "grad")
        with _transform() as transform:
            args = list(args)
            trees, originals = {}, []
            for n in numbers:
                leaves, rebuild = _flatten(args[n])
                originals += leaves
                leaves = [_differentiable(x, "grad") for x in leaves]
                trees[n] = (leaves, rebuild)
                args[n] = rebuild(leaves)
            output = func(*args, **kwargs)
            output, aux = _aux(output, "grad") if has_aux else (output, None)
            if not isinstance(output, Tensor):
                raise RuntimeError(f"grad: the function must return a tensor (a number), got {type(output).__name__}"
                                   + ("" if has_aux else "; pass has_aux=True to return (output, aux)"))
            if output.numel() != 1:
                raise RuntimeError(f"grad: the function must return one number, got a tensor of shape {output.shape}"
                                   " (use vjp or jacrev for other outputs)")
            inputs = [x for n in numbers for x in trees[n][0]]
            ones = Tensor._wrap(backend.namespace(output._data).ones(output._data.shape, output.dtype), output)
            grads = iter(_gradients([output], [ones], inputs, _keeps_graph(originals, transform)))
            result = _outside(tuple(trees[n][1]([next(grads) for _ in trees[n][0]]) for n in numbers), transform)
            output, aux = _outside((output, aux), transform)
        result = result[0] if isinstance(argnums, int) else result
        return (result, (output, aux)) if has_aux else (result, output)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``∂func/∂args[argnums]`` (``torch.func.grad``): see ``grad_and_value``; with ``has_aux`` ``(grad, aux)``.

    >>> import tinyattn as ta
    >>> ta.func.grad(lambda x: (x ** 3).sum())(ta.tensor([1.0, 2.0]))
    tensor([ 3., 12.])
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradients, (_, aux) = grad_and_value(func, argnums, has_aux=True)(*args, **kwargs) if has_aux else \
            (grad_and_value(func, argnums)(*args, **kwargs)[0], (None, None))
        return (gradients, aux) if has_aux else gradients
    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)`` with ``vjp_fn(cotangents)`` → one gradient per primal: ``uᵀ J`` (the
    cotangents shaped as the output, a tensor or a tree of them); with ``has_aux`` ``(output, vjp_fn, aux)``.

    ``func``: a function of tensors; ``primals``: its arguments (tensors or trees of them).

    >>> import tinyattn as ta
    >>> from tinyattn.func import vjp
    >>> out, vjp_fn = vjp(lambda x: x * x, ta.tensor([1.0, 2.0]))
    >>> vjp_fn(ta.tensor([1.0, 10.0]))                # uᵀ J with J = diag(2x)
    (tensor([ 2., 40.]),)
    """
    with _transform() as transform:
        trees = [_flatten(p) for p in primals]
        originals = [x for part, _ in trees for x in part]
        leaves = [[_differentiable(x, "vjp") for x in part] for part, _ in trees]
        output = func(*[build(part) for part, (_, build) in zip(leaves, trees)])
        output, aux = _aux(output, "vjp") if has_aux else (output, None)
        outputs, _ = _flatten(output)
        for out in outputs:
            if not isinstance(out, Tensor):
                raise RuntimeError(f"vjp: the function must return tensors, got {type(out).__name__}")
        output, aux = _outside((output, aux), transform)
    inputs = [x for part in leaves for x in part]

    def vjp_fn(cotangents):
        cts, _ = _flatten(cotangents)
        if len(cts) != len(outputs):
            raise RuntimeError(f"vjp_fn: {len(cts)} cotangents for {len(outputs)} outputs")
        for ct, out in zip(cts, outputs):
            if not isinstance(ct, Tensor) or ct.shape != out.shape:
                raise RuntimeError(f"vjp_fn: a cotangent of shape {getattr(ct, 'shape', type(ct).__name__)} for an "
                                   f"output of shape {out.shape}")
        with _transform() as transform:
            keep = _keeps_graph(originals, transform) or any(
                isinstance(ct, BatchedTensor) or (transform.outer_grad_enabled and ct.requires_grad) for ct in cts)
            grads = iter(_gradients(outputs, cts, inputs, create_graph=bool(keep), retain_graph=True))
            return _outside(tuple(build([next(grads) for _ in part]) for part, (_, build) in zip(leaves, trees)),
                            transform)

    return (output, vjp_fn, aux) if has_aux else (output, vjp_fn)


# ----------------------------------------------------------------------------- forward mode

def _dual(x, tangent, level):
    alias = ops.reshape(x, x.shape)  # an alias in x's graph, which carries the tangent
    alias._tangents = {**(x._tangents or {}), level: tangent}
    return alias


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J · tangents)`` by forward mode (``torch.func.jvp``): ``primals`` and ``tangents``
    are tuples of the same trees of tensors (at least one), each tangent of its primal's shape and dtype. With
    ``strict=True`` an output that does not depend on the primals (no tangent reaches it) raises.

    >>> import tinyattn as ta
    >>> from tinyattn.func import jvp
    >>> out, tangent = jvp(lambda x: x ** 3, (ta.tensor([2.0]),), (ta.tensor([1.0]),))
    >>> out, tangent                                  # x³ and 3x² · 1
    (tensor([8.]), tensor([12.]))
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp: primals and tangents must be tuples")
    p_leaves, rebuild = _flatten(primals)
    t_leaves, _ = _flatten(tangents)
    if not p_leaves:
        raise RuntimeError(f"jvp: expected primals to hold at least one tensor, got {_structure(primals)}")
    if len(p_leaves) != len(t_leaves):
        raise RuntimeError(f"jvp: {len(t_leaves)} tangents for {len(p_leaves)} primals")
    for p, t in zip(p_leaves, t_leaves):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor):
            raise RuntimeError("jvp: primals and tangents must be tensors")
        if p.shape != t.shape:
            raise RuntimeError(f"jvp: a tangent of shape {t.shape} for a primal of shape {p.shape}")
    level = modes.new_level()  # (shared with forward_ad's: a tangent's level is unique)
    with _transform():
        opened = modes.change(dual_levels=modes.current().dual_levels + (level,))
        try:
            duals = [_dual(p, t if t.dtype == p.dtype else t._to_dtype(p.dtype), level)
                     for p, t in zip(p_leaves, t_leaves)]
            output = func(*rebuild(duals))
            output, aux = _aux(output, "jvp") if has_aux else (output, None)
            outputs, rebuild_output = _flatten(output)
            primal_out, tangent_out = [], []
            for out in outputs:
                if not isinstance(out, Tensor):
                    raise RuntimeError(f"jvp: the function must return tensors, got {type(out).__name__}")
                tangent = (out._tangents or {}).get(level)
                if tangent is None and strict:
                    raise RuntimeError(f"jvp(strict=True): an output of shape {out.shape} does not depend on the "
                                       "primals (no tangent reaches it); strict mode refuses it")
                plain = ops.reshape(out, out.shape)  # the output without this level's tangent
                plain._tangents = {k: v for k, v in (out._tangents or {}).items() if k != level} or None
                primal_out.append(plain)
                tangent_out.append(tangent if tangent is not None else _zeros_like(out))
        finally:
            modes.change(**opened)
    result = (rebuild_output(primal_out), rebuild_output(tangent_out))
    return result + (aux,) if has_aux else result


# ----------------------------------------------------------------------------- vmap


def _in_dims_of(in_dims, args):
    """``in_dims`` as one list per positional argument, of one entry per leaf of the argument (``_broadcast``)."""
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, tuple) and len(in_dims) != len(args):
        raise ValueError(f"vmap: in_dims {in_dims!r}: expected an int, or a tuple of {len(args)} (one per positional "
                         "argument: an int, None, or a tuple, list or dict matching the argument)")
    per_argument = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    dims = [_broadcast(dim, arg) for dim, arg in zip(per_argument, args)]
    for i, (dim, arg) in enumerate(zip(per_argument, args)):
        if dims[i] is None:
            raise ValueError(f"vmap: in_dims {dim!r} for argument {i} does not match its structure {_structure(arg)}: "
                             "a tuple, list or dict in in_dims stands where the argument has one of the same kind "
                             "and length (the same keys); an int or None stands for a whole subtree")
    return dims


def _check_out_dims(out_dims):
    for dim in _flatten(out_dims)[0]:
        if dim is not None and not isinstance(dim, int):
            raise ValueError(f"vmap: out_dims {out_dims!r}: expected an int, None, or a tuple, list or dict of them "
                             f"(where each output's batch axis goes), got a {type(dim).__name__}")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a batch axis of its inputs (``torch.func.vmap``): ``in_dims`` gives, per
    positional argument (or for all), the axis that holds the batch, or ``None`` for an argument shared by
    every example; ``out_dims`` where the batch goes in the outputs. ``func`` runs once, on whole arrays.
    ``randomness``: ``"error"`` (a random draw inside raises), ``"same"`` (one draw for every example) or
    ``"different"`` (one per example). ``chunk_size``: run the batch that many examples at a time.

    >>> import tinyattn as ta
    >>> w = ta.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> ta.func.vmap(lambda x: w @ x)(ta.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    tensor([[1., 3.],
            [2., 4.],
            [3., 7.]])
    """
    if randomness not in ("error", "same", "different"):
        raise ValueError(f"vmap: randomness must be 'error', 'same' or 'different', got {randomness!r}")
    _check_chunk_size(chunk_size, "vmap")
    _check_out_dims(out_dims)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        dims = _in_dims_of(in_dims, args)
        flat = []  # (position, leaf index, tensor, dim)
        args = list(args)
        rebuilders = {}
        for i, (arg, arg_dims) in enumerate(zip(args, dims)):
            leaves, rebuild = _flatten(arg)
            rebuilders[i] = (leaves, rebuild)
            for j, (leaf, d) in enumerate(zip(leaves, arg_dims)):
                if d is None:
                    continue
                if not isinstance(leaf, Tensor):
                    raise ValueError(f"vmap: in_dims gives the batch axis {d} for argument {i}, which is a "
                                     f"{type(leaf).__name__}, not a tensor (use None for it)")
                if not isinstance(d, int) or not -leaf.ndim <= d < max(leaf.ndim, 1) or leaf.ndim == 0:
                    raise ValueError(f"vmap: in_dims {d!r} is out of range for argument {i} of shape {leaf.shape} "
                                     f"(it has {leaf.ndim} dimensions)")
                flat.append((i, j, leaf, d % leaf.ndim))
        if not flat:
            raise ValueError("vmap: at least one argument must be a tensor mapped over (in_dims not all None)")
        sizes = {leaf.shape[d] for _, _, leaf, d in flat}
        if len(sizes) != 1:
            raise ValueError("vmap: expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{[leaf.shape[d] for _, _, leaf, d in flat]}")
        size = sizes.pop()
        if chunk_size is not None and chunk_size < size:
            return _in_chunks(func, in_dims, dims, out_dims, randomness, chunk_size, args, kwargs, size)
        return _vmap_call(func, flat, rebuilders, args, kwargs, size, out_dims, randomness)
    return wrapper


def _vmap_call(func, flat, rebuilders, args, kwargs, size, out_dims, randomness):
    level = modes.new_level()
    outer = modes.current().vmap_levels
    leaves_by_arg = {i: list(leaves) for i, (leaves, _) in rebuilders.items()}
    for i, j, leaf, d in flat:  # the batch axis to the front, marked as this level's
        moved = ops.permute(leaf, d, *[k for k in range(leaf.ndim) if k != d]) if d else ops.reshape(leaf, leaf.shape)
        _mark(moved, level)
        leaves_by_arg[i][j] = moved
    for i, (_, rebuild) in rebuilders.items():
        args[i] = rebuild(leaves_by_arg[i])
    saved = modes.change(vmap_levels=outer + (level,), vmap_sizes={**modes.current().vmap_sizes, level: size},
                         batching=batching.apply_batched, randomness=randomness,
                         per_example=_per_example if randomness == "different" else None)
    try:
        output = func(*args, **kwargs)
        outputs, rebuild = _flatten(output)
        results = []
        for out, d in zip(outputs, _expanded_out_dims(out_dims, output)):
            if not isinstance(out, Tensor) and d is not None:
                raise ValueError(f"vmap: the function must return tensors (or trees of them), got a "
                                 f"{type(out).__name__}; give it out_dims None to return it as it is")
            results.append(out if d is None and not isinstance(out, Tensor) else
                           _unbatched(out, level, size, d))  # (while the level is open: see physical)
    finally:
        modes.change(**saved)
    return rebuild(results)


def _per_example(draw, shape):
    """A random tensor of ``shape`` drawn afresh for each example of every open level (``randomness="different"``)."""
    levels, sizes = modes.current().vmap_levels, modes.current().vmap_sizes
    out = Tensor._wrap(draw(tuple(sizes[level] for level in levels) + tuple(shape)))
    out.__class__ = batched_class(levels)
    return out


def _mark(t, level):
    """``t`` (its leading logical axis the batch) marked batched at the new, innermost ``level``; its tangents too."""
    t.__class__ = batched_class(levels_of(t) + (level,))
    for tangent in (batching.open_tangents(t) or {}).values():
        _mark(tangent, level)


def _expanded_out_dims(out_dims, output):
    """``out_dims`` as one entry per leaf of ``output`` (``_broadcast``; ``(d,)`` also stands for one tensor)."""
    if isinstance(output, Tensor) and isinstance(out_dims, tuple) and len(out_dims) == 1:
        out_dims = out_dims[0]
    dims = _broadcast(out_dims, output)
    if dims is None:
        raise ValueError(f"vmap: out_dims {out_dims!r} does not match the structure of the outputs "
                         f"{_structure(output)}: a tuple, list or dict in out_dims stands where the outputs have one "
                         "of the same kind and length (the same keys); an int or None stands for a whole subtree")
    return dims


def _unbatched(out, level, size, out_dim):
    """An output of the function: this level's batch axis made a real axis again, at ``out_dim``."""
    levels = levels_of(out)
    if level not in levels and out_dim is None:  # the same for every example, and asked for once
        return out
    if out_dim is None:
        raise ValueError(f"vmap: out_dims None for an output of shape {out.shape} that differs from example to "
                         "example: None is possible only for an output that is the same for every example")
    if not -out.ndim - 1 <= out_dim <= out.ndim:
        raise IndexError(f"vmap: out_dims {out_dim} is out of range for an output of shape {out.shape} (with the "
                         f"batch axis, rank {out.ndim + 1}): expected one in [{-out.ndim - 1}, {out.ndim}]")
    if level not in levels:  # the same for every example: repeated along the new axis
        out = ops.expand(ops.unsqueeze(out, 0), size, *out.shape)
    else:
        out = _drop_level(out, level)
    if out_dim % out.ndim:
        dims = list(range(1, out.ndim))
        dims.insert(out_dim % out.ndim, 0)
        out = ops.permute(out, *dims)
    return out


def _drop_level(t, level):
    """``t`` (batched at ``level``, the innermost) with that batch axis a real, leading axis; its tangents alike."""
    levels = levels_of(t)
    if level not in levels:  # (a tangent the same for every example)
        return ops.expand(ops.unsqueeze(t, 0), modes.current().vmap_sizes.get(level, 1), *t.shape)
    alias = batching.physical(t, levels)
    alias.__class__ = batched_class(tuple(lv for lv in levels if lv != level))
    tangents = batching.open_tangents(t)
    if tangents:
        alias._tangents = {lv: _drop_level(tangent, level) for lv, tangent in tangents.items()}
    return alias


def _in_chunks(func, in_dims, dims, out_dims, randomness, chunk_size, args, kwargs, size):
    """``vmap`` over ``chunk_size`` examples at a time, the pieces joined (``dims``: ``_in_dims_of``). With
    ``randomness="same"`` every chunk draws what the first drew (the generators put back before each), so the batch
    sees one draw, as unchunked."""
    pieces = []
    state = backend.get_rng_state() if randomness == "same" else None
    for start in range(0, size, chunk_size):
        if state is not None and start:
            backend.set_rng_state(state)
        chunk_args = [_take(arg, arg_dims, start, start + chunk_size) for arg, arg_dims in zip(args, dims)]
        pieces.append(vmap(func, in_dims, out_dims, randomness)(*chunk_args, **kwargs))
    _, rebuild = _flatten(pieces[0])
    columns = zip(*[_flatten(p)[0] for p in pieces])
    return rebuild([column[0] if d is None else ops.cat(list(column), d)  # (None: the same in every chunk)
                    for column, d in zip(columns, _expanded_out_dims(out_dims, pieces[0]))])


def _take(arg, dims, start, stop):
    """Examples ``start:stop`` of the leaves of ``arg`` mapped over (at ``dims``, one per leaf)."""
    leaves, rebuild = _flatten(arg)
    return rebuild([leaf if d is None else leaf[(slice(None),) * (d % leaf.ndim) + (slice(start, stop),)]
                    for leaf, d in zip(leaves, dims)])


def _check_chunk_size(chunk_size, name):
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError(f"{name}: `chunk_size` should be None or greater than 0, got {chunk_size!r}")


# ----------------------------------------------------------------------------- Jacobians


def _basis(shape, dtype, device):
    """The identity over a tensor of ``shape``: ``(N, *shape)``, row ``k`` the k-th unit tensor."""
    n = int(np.prod(shape, dtype=np.int64))
    eye = backend.namespace_for(device).eye(n, dtype=dtype)
    return Tensor._wrap(eye.reshape((n,) + tuple(shape)))


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian by reverse mode (``torch.func.jacrev``): ``vmap`` of ``vjp`` over the rows of an identity of
    the output's size. Shape: the output's shape followed by the input's.

    ``argnums``: which argument(s) to differentiate; ``has_aux``: ``func`` returns ``(output, aux)``;
    ``chunk_size``: how many rows to compute at once (all by default).

    >>> import tinyattn as ta
    >>> from tinyattn.func import jacrev
    >>> jacrev(lambda x: x.exp())(ta.tensor([0.0, 0.0])).numpy()
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    _check_chunk_size(chunk_size, "jacrev")

    @functools.wraps(func)
    def wrapper(*args):
        numbers = _argnums(argnums, len(args), "jacrev")

        def of_chosen(*chosen):
            full_args = list(args)
            for n, value in zip(numbers, chosen):
                full_args[n] = value
            return func(*full_args)

        result = vjp(of_chosen, *[args[n] for n in numbers], has_aux=has_aux)
        output, vjp_fn = result[0], result[1]
        outputs, rebuild = _flatten(output)
        jacobians = []
        for k, out in enumerate(outputs):
            basis = _basis(out.shape, out.dtype, out.device)

            def row(u, k=k):
                cts = [u if i == k else _zeros_like(o) for i, o in enumerate(outputs)]
                return vjp_fn(rebuild(cts))
            rows = vmap(row, chunk_size=chunk_size)(basis)  # per input: (N_out, *input shape)
            jacobians.append(tuple(_reshape_tree(r, out.shape) for r in rows))
        per_output = [j[0] if isinstance(argnums, int) else j for j in jacobians]
        jac = rebuild(per_output)
        return (jac, result[2]) if has_aux else jac
    return wrapper


def _reshape_tree(tree, out_shape):
    leaves, rebuild = _flatten(tree)
    return rebuild([leaf.reshape(tuple(out_shape) + leaf.shape[1:]) for leaf in leaves])


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian by forward mode (``torch.func.jacfwd``): ``vmap`` of ``jvp`` over the columns of an
    identity of the input's size. Shape: the output's shape followed by the input's.

    ``argnums``: which argument(s) to differentiate; ``has_aux``: ``func`` returns ``(output, aux)``;
    ``randomness``: as ``vmap``'s.

    >>> import tinyattn as ta
    >>> from tinyattn.func import jacfwd
    >>> jacfwd(lambda x: x.sum() * x)(ta.tensor([1.0, 2.0]))       # s·I + x 1ᵀ
    tensor([[4., 1.],
            [2., 5.]])
    """
    @functools.wraps(func)
    def wrapper(*args):
        numbers = _argnums(argnums, len(args), "jacfwd")
        chosen = [args[n] for n in numbers]
        trees = [_flatten(c) for c in chosen]  # an argument may be a tree of tensors, as jacrev's
        every = [leaf for leaves, _ in trees for leaf in leaves]

        def of_chosen(*values):
            full_args = list(args)
            for n, value in zip(numbers, values):
                full_args[n] = value
            return func(*full_args)

        if not every:
            raise RuntimeError(f"jacfwd: the arguments at argnums {argnums!r} hold no tensor to differentiate")
        by_leaf = []  # per input leaf: its Jacobian for each output leaf, (*out, *in)
        for position, x in enumerate(every):
            basis = _basis(x.shape, x.dtype, x.device)  # (N_in, *x.shape)

            def column(v, position=position):
                tangents, start = [], 0
                for leaves, rebuild_tree in trees:
                    tangents.append(rebuild_tree([v if start + i == position else _zeros_like(c)
                                                  for i, c in enumerate(leaves)]))
                    start += len(leaves)
                return jvp(of_chosen, tuple(chosen), tuple(tangents), has_aux=has_aux)[1]
            columns = vmap(column, randomness=randomness)(basis)  # (N_in, *output shape), per output
            leaves, rebuild_output = _flatten(columns)
            moved = []
            for leaf in leaves:  # (N_in, *out) -> (*out, *in)
                out_ndim = leaf.ndim - 1
                leaf = ops.permute(leaf, *range(1, leaf.ndim), 0)
                moved.append(leaf.reshape(leaf.shape[:out_ndim] + x.shape))
            by_leaf.append(moved)
        per_output = []  # as PyTorch nests them: by output, then by argnum, then by the argument's own tree
        for k in range(len(by_leaf[0])):
            per_argument, start = [], 0
            for leaves, rebuild_tree in trees:
                per_argument.append(rebuild_tree([by_leaf[start + i][k] for i in range(len(leaves))]))
                start += len(leaves)
            per_output.append(per_argument[0] if isinstance(argnums, int) else tuple(per_argument))
        jac = rebuild_output(per_output)
        if not has_aux:
            return jac
        return jac, func(*args)[1]  # (the aux is the same for every column: one plain call gives it)
    return wrapper


def hessian(func, argnums=0):
    """The Hessian (``torch.func.hessian``): ``jacfwd(jacrev(func))``, shape the input's twice.

    ``func``: a function returning one number; ``argnums``: which argument(s) to differentiate.

    >>> import tinyattn as ta
    >>> from tinyattn.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(ta.tensor([1.0, 2.0])).numpy()    # diag(6x)
    array([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)
    """
    return jacfwd(jacrev(func, argnums), argnums)


# ----------------------------------------------------------------------------- modules as functions


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with its parameters and buffers replaced, for the call, by the tensors of
    ``parameter_and_buffer_dicts`` (a dict, or several, by dotted name), as ``torch.func.functional_call``:
    how ``grad`` and ``vmap`` take a model's weights as an argument.

    ``args``, ``kwargs``: the call's arguments (a single non-tuple ``args`` is one argument); ``tie_weights``:
    a replaced tensor replaces every name it is shared under; ``strict``: every parameter and buffer must be
    replaced.

    >>> import tinyattn as ta
    >>> from tinyattn.func import functional_call, grad
    >>> layer = ta.nn.Linear(2, 1, bias=False)
    >>> weights = {"weight": ta.tensor([[1.0, 2.0]])}
    >>> functional_call(layer, weights, (ta.tensor([[3.0, 4.0]]),))
    tensor([[11.]])
    >>> grad(lambda w: functional_call(layer, w, (ta.tensor([[3.0, 4.0]]),)).sum())(weights)["weight"]
    tensor([[3., 4.]])
    """
    dicts = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, (list, tuple)) else \
        [parameter_and_buffer_dicts]
    values = {}
    for d in dicts:
        for name, value in d.items():
            if name in values:
                raise ValueError(f"functional_call: {name!r} appears in more than one dict")
            values[name] = value
    tables = {}
    for name, sub in module.named_modules():
        for table in (sub._parameters, sub._buffers):
            for key in table:
                tables[f"{name}.{key}" if name else key] = (sub, table, key)
    unknown = [name for name in values if name not in tables]
    if unknown:
        raise ValueError(f"functional_call: unexpected keys {unknown}: the module has no such parameter or buffer")
    if strict:
        missing = [name for name in tables if name not in values]
        if missing:
            raise ValueError(f"functional_call(strict=True): missing keys {missing}")
    saved = [(sub, table, key, table[key]) for name, (sub, table, key) in tables.items() if name in values]
    try:
        for name, (sub, table, key) in tables.items():
            if name in values:
                table[key] = values[name]
                sub._registered(key, values[name])  # (the instance's attribute mirrors the table)
        args = args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for sub, table, key, value in saved:
            table[key] = value
            sub._registered(key, value)

