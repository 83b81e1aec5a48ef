"""Jacobians, Hessians and their products for a function of tensors, with ``torch.autograd.functional``'s API.

Each function takes ``func`` and ``inputs`` (a tensor, or a tuple of tensors: ``func(*inputs)``) and runs
``func`` once on fresh aliases of the inputs, then differentiates its outputs with ``ta.autograd.grad``:

    vjp(func, x, v)        func(x), vᵀ J                 one backward pass
    jvp(func, x, v)        func(x), J v                  the double-backward trick: J v = ∂(Jᵀ u)/∂u · v
    vhp(func, x, v)        func(x), vᵀ H                 a backward pass through the gradient
    hvp(func, x, v)        func(x), H v                  the double-backward trick on the gradient
    jacobian(func, x)      J, one backward pass per output element (``vectorize=True``: ``ta.func.vmap``
                           of a VJP over the rows of an identity; ``strategy="forward-mode"``: of a JVP
                           over its columns)
    hessian(func, x)       the Jacobian of the gradient

Results nest as torch nests them: for several inputs a tuple (one entry per input), for several outputs
a tuple of such tuples (``jacobian(f, (x, y))[i][j]`` is ∂outᵢ/∂inputⱼ, of shape ``outᵢ.shape +
inputⱼ.shape``). With ``create_graph=True`` the results carry their graph (they can be differentiated
again, back to the inputs); otherwise they are detached. ``strict=True`` raises when an output does not
depend on an input (where the result would be a silent zero), with torch's messages.

>>> import tinyattn as ta
>>> from tinyattn.autograd.functional import jacobian, hessian
>>> x = ta.tensor([1.0, 2.0], dtype=ta.float64)
>>> jacobian(lambda t: t ** 2, x)                     # diag(2x)
tensor([[2., 0.],
        [0., 4.]], dtype=float64)
>>> hessian(lambda t: (t ** 3).sum(), x)              # diag(6x)
tensor([[ 6.,  0.],
        [ 0., 12.]], dtype=float64)
"""

from .. import backend
from ..creation import zeros_like
from ..engine import Tensor, enable_grad, is_grad_enabled, set_grad_enabled
from ..ops import permute, stack
from . import grad as _grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


# ----------------------------------------------------------------------------- inputs, outputs and v


def _as_tuple(value, arg_name, fn_name):
    """``(was_a_tuple, value as a tuple)``, every element checked to be a tensor."""
    is_tuple = isinstance(value, tuple)
    value = value if is_tuple else (value,)
    for i, element in enumerate(value):
        if not isinstance(element, Tensor):
            where = f"the value at index {i} has type" if is_tuple else f"the given {arg_name} has type"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"{where} {type(element).__name__}.")
    return is_tuple, value


def _outputs_checked(func, fn_name):
    """``func`` with its outputs checked to be a tensor or a tuple of tensors (``_as_tuple``'s ``TypeError``),
    before a transform (``ta.func.vjp``, ``jvp``) sees them and raises its own error."""
    def checked(*args):
        outputs = func(*args)
        _as_tuple(outputs, "outputs of the user-provided function", fn_name)
        return outputs
    return checked


def _unpacked(result, to_unpack):
    """``result`` (a tuple, or a tuple of tuples) with the levels that were not tuples for the user unpacked:
    ``to_unpack`` is one flag, or ``(outputs were a tuple, inputs were a tuple)``."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            result = tuple(r[0] for r in result)
        if not to_unpack[0]:
            result = result[0]
    elif not to_unpack:
        result = result[0]
    return result


def _prepared(inputs, create_graph, need_graph):
    """The tensors ``func`` runs on: under ``create_graph`` an input that requires grad is aliased in its
    graph (the results then reach it); any other input is detached and made a leaf of its own."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad else _requiring_grad(x.detach(), need_graph)
                 for x in inputs)


def _requiring_grad(t, requires_grad=True):
    """``t`` with its ``requires_grad`` flag set. Not ``requires_grad_``, which a ``ta.func`` transform refuses: this
    module vectorizes its Jacobians with ``ta.func.vmap``, where PyTorch's functional API has a vmap of its own that
    allows the flag."""
    t.requires_grad = requires_grad
    return t


def _finished(results, create_graph):
    """``results`` (tensors, or tuples of them) detached unless ``create_graph``."""
    if isinstance(results[0], Tensor):
        return results if create_graph else tuple(r.detach() for r in results)
    return tuple(_finished(r, create_graph) for r in results)


def _checked_v(v, others, others_are_tuple, fn_name, create_graph):
    """``v`` as a tuple, each entry of its ``others``' shape (the outputs for vjp, the inputs otherwise)."""
    _, v = _as_tuple(v, "v", fn_name)
    v = _prepared(v, create_graph, need_graph=False)
    if len(v) != len(others):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(others)} but got {len(v)}."
                           if others_are_tuple else "The given v should contain a single Tensor.")
    for i, (el_v, el_other) in enumerate(zip(v, others)):
        if el_v.shape != el_other.shape:
            prefix = f"Entry {i} in " if others_are_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {el_other.shape} but got {el_v.shape}.")
    return v


def _one_element_v(tensors, fn_name, what):
    if len(tensors) != 1 or tensors[0].numel() != 1:
        raise RuntimeError(f"{fn_name}: the vector v can only be None if {what} is a single Tensor with a single "
                           "element.")


def _single_output(outputs, outputs_are_tuple, fn_name):
    if outputs_are_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")


# ----------------------------------------------------------------------------- strict mode


def _check_requires_grad(tensors, kind, strict):
    """Under ``strict``: every one of ``tensors`` (the function's ``outputs``, the ``grad_inputs`` of the
    double-backward trick, the ``jacobian`` or ``hessian`` of a Hessian) exists and requires grad."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                               "not allowed in strict mode.")
        if t.requires_grad:
            continue
        if kind == "hessian":
            raise RuntimeError(f"The hessian of the user-provided function with respect to input {i} is "
                               "independent of the input. This is not allowed in strict mode. You should ensure "
                               "that your function is thrice differentiable and that the hessian depends on the "
                               "inputs.")
        if kind == "jacobian":
            raise RuntimeError("While computing the hessian, found that the jacobian of the user-provided function "
                               f"with respect to input {i} is independent of the input. This is not allowed in "
                               "strict mode. You should ensure that your function is twice differentiable and "
                               "that the jacobian depends on the inputs (this would be violated by a linear "
                               "function for example).")
        if kind == "grad_inputs":
            raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the "
                               "user-provided function. This is not allowed in strict mode.")
        raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                           "must be computed in a differentiable manner from the input when running in strict "
                           "mode.")


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in "
            "strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when "
                  "using the double backward trick to compute forward mode gradients. This is not allowed in "
                  "strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed "
                   "in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the "
                         "grad_jacobian. This is not allowed in strict mode as it prevents from using the double "
                         "backward trick to replace forward mode AD.",
}


def _zeros_where_missing(grads, refs, strict, create_graph, stage):
    """``grads`` with each ``None`` (nothing reached it) made zeros of its reference's shape; under
    ``strict`` a ``None``, or under ``strict`` and ``create_graph`` a gradient without a graph, raises."""
    result = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of input {i}. This is not "
                               "allowed in strict mode when create_graph=True.")
        result.append(g)
    return tuple(result)


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """``ta.autograd.grad`` over the outputs that require grad (``None`` for every input when none does),
    ``None`` for an input they do not reach."""
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else grad_outputs
    pairs = [(out, g) for out, g in zip(outputs, grad_outputs) if out is not None and out.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    used_outputs, used_grads = zip(*pairs)
    return _grad(used_outputs, inputs, used_grads, retain_graph=retain_graph, create_graph=create_graph,
                 allow_unused=True)


# ----------------------------------------------------------------------------- products


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), vᵀ J)``: the vector-Jacobian product, one gradient per input (torch's ``vjp``).
    ``v`` has the outputs' shapes; it may be omitted only when ``func`` returns one one-element tensor.

    >>> import tinyattn as ta
    >>> from tinyattn.autograd.functional import vjp
    >>> x = ta.tensor([1.0, 2.0], dtype=ta.float64)
    >>> vjp(lambda t: (t ** 2).sum(), x)                  # (Σx², 2x)
    (tensor(5., dtype=float64), tensor([2., 4.], dtype=float64))
    """
    with enable_grad():
        inputs_are_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepared(inputs, create_graph, need_graph=True)
        outputs_are_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        if v is not None:
            v = _checked_v(v, outputs, outputs_are_tuple, "vjp", create_graph)
        else:
            _one_element_v(outputs, "vjp", "the user-provided function returns")
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grads = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        grads = _zeros_where_missing(grads, inputs, strict, create_graph, "back")
    return (_unpacked(_finished(outputs, create_graph), outputs_are_tuple),
            _unpacked(_finished(grads, create_graph), inputs_are_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product, one per output (torch's ``jvp``), by the
    double-backward trick as torch computes it: ``g(u) = Jᵀ u`` is linear in ``u``, so its own VJP with
    ``v`` is ``J v``. ``v`` has the inputs' shapes; it may be omitted only for one one-element input.

    >>> import tinyattn as ta
    >>> from tinyattn.autograd.functional import jvp
    >>> x = ta.tensor([1.0, 2.0], dtype=ta.float64)
    >>> jvp(lambda t: t ** 2, x, ta.tensor([1.0, 1.0], dtype=ta.float64))[1]     # 2x · v
    tensor([2., 4.], dtype=float64)
    """
    with enable_grad():
        inputs_are_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepared(inputs, create_graph, need_graph=True)
        if v is not None:
            v = _checked_v(v, inputs, inputs_are_tuple, "jvp", create_graph)
        else:
            _one_element_v(inputs, "jvp", "the input to the user-provided function")
        outputs_are_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        dummies = tuple(zeros_like(out, requires_grad=True) for out in outputs)  # u, whose value never matters
        grad_inputs = _autograd_grad(outputs, inputs, dummies, create_graph=True)  # Jᵀ u, with its graph
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        products = _autograd_grad(grad_inputs, dummies, v, create_graph=create_graph)  # ∂(Jᵀ u)/∂u · v = J v
        products = _zeros_where_missing(products, outputs, strict, create_graph, "back_trick")
    return (_unpacked(_finished(outputs, create_graph), outputs_are_tuple),
            _unpacked(_finished(products, create_graph), outputs_are_tuple))


def _gradient_of_scalar(func, inputs, v, create_graph, strict, fn_name):
    """What ``vhp`` and ``hvp`` share: the prepared inputs and ``v``, the output and its gradient (with graph)."""
    inputs_are_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _prepared(inputs, create_graph, need_graph=True)
    if v is not None:
        v = _checked_v(v, inputs, inputs_are_tuple, fn_name, create_graph)
    else:
        _one_element_v(inputs, fn_name, "the input to the user-provided function")
    outputs_are_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    _single_output(outputs, outputs_are_tuple, fn_name)
    gradient = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(gradient, "jacobian", strict)
    return inputs_are_tuple, inputs, v, outputs, gradient


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), vᵀ H)`` for a ``func`` that returns one number: the VJP of its gradient (torch's
    ``vhp``). ``v`` has the inputs' shapes.

    >>> import tinyattn as ta
    >>> from tinyattn.autograd.functional import vhp
    >>> x = ta.tensor([1.0, 2.0], dtype=ta.float64)
    >>> vhp(lambda t: (t ** 3).sum(), x, ta.tensor([1.0, 1.0], dtype=ta.float64))[1]     # 6x · v
    tensor([ 6., 12.], dtype=float64)
    """
    with enable_grad():
        inputs_are_tuple, inputs, v, outputs, gradient = _gradient_of_scalar(func, inputs, v, create_graph, strict,
                                                                             "vhp")
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        products = _autograd_grad(gradient, inputs, v, create_graph=create_graph)
        products = _zeros_where_missing(products, inputs, strict, create_graph, "double_back")
    return _unpacked(_finished(outputs, create_graph), False), \
        _unpacked(_finished(products, create_graph), inputs_are_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` for a ``func`` that returns one number (torch's ``hvp``): the double-backward
    trick on its gradient. ``H`` is symmetric for a twice continuously differentiable ``func``, so this equals
    ``vhp``; torch keeps both, and so does this module.

    >>> import tinyattn as ta
    >>> from tinyattn.autograd.functional import hvp
    >>> x = ta.tensor([1.0, 2.0], dtype=ta.float64)
    >>> hvp(lambda t: (t ** 3).sum(), x, ta.tensor([1.0, 0.0], dtype=ta.float64))[1]     # 6x · v
    tensor([6., 0.], dtype=float64)
    """
    with enable_grad():
        inputs_are_tuple, inputs, v, outputs, gradient = _gradient_of_scalar(func, inputs, v, create_graph, strict,
                                                                             "hvp")
        dummies = tuple(zeros_like(x, requires_grad=True) for x in inputs)
        double_back = _autograd_grad(gradient, inputs, dummies, create_graph=True)  # H u, with its graph
        _check_requires_grad(gradient, "hessian", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        products = _autograd_grad(double_back, dummies, v, create_graph=create_graph)  # ∂(H u)/∂u · v = Hᵀ v
        products = _zeros_where_missing(products, inputs, strict, create_graph, "double_back_trick")
    return _unpacked(_finished(outputs, create_graph), False), \
        _unpacked(_finished(products, create_graph), inputs_are_tuple)


# ----------------------------------------------------------------------------- Jacobians


def _standard_basis(tensors, numels):
    """One chunk per tensor, ``(Σ numels, numelᵢ)``: together, the rows of the identity over all the tensors'
    elements, split by tensor (row ``r`` is the ``r``-th unit vector of the concatenation)."""
    total, chunks, start = sum(numels), [], 0
    for t, n in zip(tensors, numels):
        xp = backend.namespace(t._data)
        chunk = xp.zeros((total, n), t.dtype)
        chunk[start:start + n] = xp.eye(n, dtype=t.dtype)
        chunks.append(Tensor._wrap(chunk, t))
        start += n
    return chunks


def _split_rows(jac, numels):
    """``jac`` cut along its first axis into pieces of ``numels`` rows."""
    starts = [sum(numels[:i]) for i in range(len(numels))]
    return [jac[start:start + n] for start, n in zip(starts, numels)]


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs`` (torch's ``jacobian``): for one input and one output a tensor
    of shape ``output.shape + input.shape``; a tuple over the inputs, a tuple over the outputs, or a tuple
    of tuples (``[i][j]``: output ``i``, input ``j``) as the arguments and results are tuples.

    By default one backward pass per output element. ``vectorize=True`` runs them at once, ``ta.func.vmap``
    of a VJP over the rows of an identity; ``strategy="forward-mode"`` (which needs ``vectorize=True``)
    maps a JVP over its columns instead, one pass per input element (cheaper when the outputs outnumber
    the inputs). ``strict=True`` goes with neither, and ``create_graph=True`` not with forward mode, as in torch.

    >>> import tinyattn as ta
    >>> from tinyattn.autograd.functional import jacobian
    >>> x, y = ta.tensor([1.0, 2.0], dtype=ta.float64), ta.tensor([3.0], dtype=ta.float64)
    >>> ((dx, dy),) = jacobian(lambda a, b: (a * b,), (x, y))     # one output (a tuple), two inputs
    >>> dx
    tensor([[3., 0.],
            [0., 3.]], dtype=float64)
    >>> dy
    tensor([[1.],
            [2.]], dtype=float64)
    >>> jacobian(lambda a: a.exp(), x, vectorize=True, strategy="forward-mode").numpy().round(3)
    array([[2.718, 0.   ],
           [0.   , 7.389]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(f'jacobian: strategy must be "forward-mode" or "reverse-mode", got {strategy!r}. Hint: '
                         'when the function has more outputs than inputs, "forward-mode" tends to be faster; '
                         'otherwise prefer "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('jacobian: create_graph=True and strategy="forward-mode" are not supported '
                                      'together (yet). Please either set create_graph=False or '
                                      'strategy="reverse-mode".')
        return _jacobian_forward(func, inputs, strict, vectorize)
    with enable_grad():
        inputs_are_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepared(inputs, create_graph, need_graph=True)
        if vectorize:
            if strict:
                raise RuntimeError("jacobian: strict=True and vectorize=True are not supported together. Please "
                                   "either set strict=False or vectorize=False.")
            return _jacobian_vectorized(func, inputs, inputs_are_tuple, create_graph)
        outputs_are_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        jacobian = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]  # per input: one gradient per element of out
            flat = out.reshape(-1)
            for k in range(out.numel()):
                grads = _autograd_grad((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
                for j, (g, x) in enumerate(zip(grads, inputs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                               f"{j}. This is not allowed in strict mode.")
                        g = zeros_like(x)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError(f"The jacobian of the user-provided function is independent of input "
                                           f"{i}. This is not allowed in strict mode when create_graph=True.")
                    rows[j].append(g)
            jacobian.append(tuple(stack(r, 0).reshape(out.shape + x.shape) for r, x in zip(rows, inputs)))
        return _unpacked(_finished(tuple(jacobian), create_graph), (outputs_are_tuple, inputs_are_tuple))


def _jacobian_vectorized(func, inputs, inputs_are_tuple, create_graph):
    """Reverse mode, every output element at once: ``ta.func.vmap`` of ``ta.func.vjp``'s pullback over the
    rows of the identity over the outputs' elements."""
    from .. import func as transforms  # (the transforms sit above autograd)

    outputs, pullback = transforms.vjp(_outputs_checked(func, "jacobian"), *inputs)
    outputs_are_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jacobian")
    numels = [out.numel() for out in outputs]
    basis = [chunk.reshape((sum(numels),) + out.shape) for chunk, out in zip(_standard_basis(outputs, numels), outputs)]
    by_input = transforms.vmap(lambda *rows: pullback(rows if outputs_are_tuple else rows[0]))(*basis)
    jacobian = tuple(tuple(piece.reshape(out.shape + x.shape) for piece, out in zip(_split_rows(jac, numels), outputs))
                     for jac, x in zip(by_input, inputs))  # [input][output]
    jacobian = tuple(zip(*jacobian))  # [output][input]
    return _unpacked(_finished(jacobian, create_graph), (outputs_are_tuple, inputs_are_tuple))


def _jacobian_forward(func, inputs, strict, vectorize):
    """Forward mode: ``ta.func.vmap`` of ``ta.func.jvp`` over the columns of the identity over the inputs'
    elements (torch's ``_jacfwd``; like it, the results are not detached)."""
    from .. import func as transforms

    if strict:
        raise RuntimeError('jacobian: strict=True and strategy="forward-mode" are not supported together (yet). '
                           'Please either set strict=False or strategy="reverse-mode".')
    inputs_are_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        raise NotImplementedError("jacobian: forward mode (and a forward-over-reverse Hessian) is implemented only "
                                  "for vectorize=True.")
    numels = [x.numel() for x in inputs]
    found = {}

    def column(*tangents):
        outputs, products = transforms.jvp(_outputs_checked(func, "jacobian"), inputs,
                                           tuple(t.reshape(x.shape) for t, x in zip(tangents, inputs)))
        found["outputs_are_tuple"], found["outputs"] = _as_tuple(outputs, "outputs of the user-provided function",
                                                                 "jacobian")
        return products if isinstance(products, tuple) else (products,)

    by_output = transforms.vmap(column)(*_standard_basis(inputs, numels))  # each (Σ numels, *output shape)
    jacobian = tuple(tuple(permute(piece, *range(1, piece.ndim), 0).reshape(out.shape + x.shape)  # (*out, n) first
                           for piece, x in zip(_split_rows(jac, numels), inputs))
                     for jac, out in zip(by_output, found["outputs"]))
    return _unpacked(jacobian, (found["outputs_are_tuple"], inputs_are_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of ``func`` (which returns one number) at ``inputs`` (torch's ``hessian``): the Jacobian of
    its gradient, ``input.shape * 2`` for one input, ``[i][j]`` (``inputᵢ.shape + inputⱼ.shape``) for a tuple.
    The inner Jacobian is reverse mode; ``outer_jacobian_strategy="forward-mode"`` (with ``vectorize=True``)
    takes the outer one by forward mode: forward over reverse.

    >>> import tinyattn as ta
    >>> from tinyattn.autograd.functional import hessian
    >>> x, y = ta.tensor([1.0], dtype=ta.float64), ta.tensor([2.0], dtype=ta.float64)
    >>> [[h.item() for h in row] for row in hessian(lambda a, b: (a * a * b).sum(), (x, y))]   # [[2b, 2a], [2a, 0]]
    [[4.0, 2.0], [2.0, 0.0]]
    """
    inputs_are_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('hessian: outer_jacobian_strategy must be "forward-mode" or "reverse-mode", got '
                         f"{outer_jacobian_strategy!r}")

    def single_output(*args):
        out = func(*args)
        outputs_are_tuple, outputs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(outputs, "outputs", strict)
        _single_output(outputs, outputs_are_tuple, "hessian")
        return out.squeeze()

    def gradient(*args):
        if outer_jacobian_strategy == "forward-mode":
            args = tuple(_requiring_grad(t) for t in args)
        jac = jacobian(single_output, args, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    result = jacobian(gradient, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                      strategy=outer_jacobian_strategy)
    return _unpacked(result, (inputs_are_tuple, inputs_are_tuple))  # (the Jacobian of a tuple over the inputs)
