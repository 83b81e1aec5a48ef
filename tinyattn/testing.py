"""Checking gradients: central finite differences, and the hypothesis strategies the tests use.

``gradcheck(fn, inputs)`` compares the engine's gradients of ``sum(fn(*inputs) * upstream)``
(``upstream`` a seeded random array, never all ones) with central finite differences in
float64, one input element at a time. It works on every device: inputs are perturbed on
a host copy and written back through the backend. ``gradgradcheck(fn, inputs)`` does the same
one order up: it runs ``gradcheck`` on the first derivative, taken with ``create_graph=True``.

>>> import numpy as np
>>> import tinyattn as ta
>>> from tinyattn.testing import gradcheck
>>> x = ta.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)   # float64
>>> gradcheck(lambda x: (x * x.tanh()).sum(0), [x])
True

The strategies (``shapes``, ``broadcastable_shapes``, ``arrays``, ``positive_arrays``,
``distinct_arrays``) need hypothesis, a test extra; they import it when called, so that
``import tinyattn`` works without it.
"""

import numpy as np

from . import backend
from .autograd import grad
from .engine import Tensor, enable_grad, no_grad


class GradcheckError(AssertionError):
    """A gradient disagrees with finite differences (or has the wrong shape or dtype).

    An ``AssertionError``, so that pytest reports it as a failed check; its message names the input, the
    element, both values and the tolerances.

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> x = ta.tensor(np.array([0.5, -1.0]), requires_grad=True)
    >>> try:
    ...     gradcheck(lambda x: x * x.detach(), [x])    # detach hides half of d(x²)/dx from the engine
    ... except GradcheckError as error:
    ...     print(error)  # doctest: +ELLIPSIS
    gradcheck: input 0 (shape (2,)), element (0,): analytic gradient 0.0628..., numeric 0.1257...; ...
    >>> issubclass(GradcheckError, AssertionError)
    True
    """


def _outputs(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _upstreams(outputs, seed):
    """One seeded standard-normal host array per output, of its shape."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(o.shape) for o in outputs]


def _objective(fn, inputs, upstreams):
    """``sum_i sum(out_i * upstream_i)`` on the host, in float64, without a graph."""
    with no_grad():
        outputs = _outputs(fn(*inputs))
    return float(sum((backend.to_numpy(o._data).astype(np.float64) * u).sum() for o, u in zip(outputs, upstreams)))


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """Check the gradients of ``fn`` at ``inputs`` against central finite differences.

    ``fn(*inputs)`` returns a tensor or a tuple of tensors. Every input with
    ``requires_grad=True`` is checked and must be float64. Returns ``True``, or raises
    ``GradcheckError`` naming the input, the element, both values and the tolerances
    when ``|analytic - numeric| > atol + rtol * |numeric|``.

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> a = ta.tensor(np.array([[1.0, 2.0]]), requires_grad=True)
    >>> b = ta.tensor(np.array([3.0, 4.0]), requires_grad=True)
    >>> gradcheck(lambda a, b: a * b + b, [a, b])
    True
    """
    inputs = list(inputs)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True, so there is nothing to check")
    for i in checked:
        if inputs[i].dtype != np.float64:
            raise TypeError(
                f"gradcheck: input {i} has dtype {inputs[i].dtype}; finite differences need float64 "
                "inputs (convert with .double())"
            )

    saved_grads = [inputs[i]._grad for i in checked]
    try:
        for i in checked:
            inputs[i]._grad = None
        outputs = _outputs(fn(*inputs))
        for k, o in enumerate(outputs):
            if o.dtype != np.float64:
                raise TypeError(f"gradcheck: output {k} has dtype {o.dtype}, expected float64")
        upstreams = _upstreams(outputs, seed)
        live = [(o, u) for o, u in zip(outputs, upstreams) if o.requires_grad]
        for k, (o, u) in enumerate(live):
            o.backward(backend.to_device(u, o.device), retain_graph=k < len(live) - 1)
        analytic = {}
        for i in checked:
            t = inputs[i]
            if t._grad is None:
                analytic[i] = np.zeros(t.shape)
                continue
            if tuple(t._grad.shape) != t.shape or t._grad.dtype != t.dtype:
                raise GradcheckError(
                    f"gradcheck: gradient of input {i} has shape {tuple(t.grad.shape)} and dtype "
                    f"{t.grad.dtype}, expected the input's shape {t.shape} and dtype {t.dtype}"
                )
            analytic[i] = backend.to_numpy(t._grad)
    finally:
        for i, g in zip(checked, saved_grads):
            inputs[i]._grad = g

    for i in checked:
        t = inputs[i]
        original, device = t._data, t.device
        host = backend.to_numpy(original)
        try:
            for index in np.ndindex(*host.shape):
                value = host[index]
                host[index] = value + eps
                t._data = backend.to_device(host.copy(), device)
                plus = _objective(fn, inputs, upstreams)
                host[index] = value - eps
                t._data = backend.to_device(host.copy(), device)
                minus = _objective(fn, inputs, upstreams)
                host[index] = value
                numeric = (plus - minus) / (2 * eps)
                got = float(analytic[i][index])
                if not abs(got - numeric) <= atol + rtol * abs(numeric):
                    raise GradcheckError(
                        f"gradcheck: input {i} (shape {t.shape}), element {index}: analytic gradient "
                        f"{got!r}, numeric {numeric!r}; difference {abs(got - numeric):.3g} exceeds "
                        f"atol + rtol*|numeric| = {atol} + {rtol}*{abs(numeric):.3g}"
                    )
        finally:
            t._data = original
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """Check the second derivatives of ``fn`` at ``inputs`` against finite differences of the first.

    With ``v`` the upstream gradients (``grad_outputs``: one per output of ``fn``; drawn from a
    generator seeded with ``seed`` when not given), the first derivative is
    ``g(*inputs) = ta.autograd.grad(fn(*inputs), inputs, v, create_graph=True)`` (a tuple: one
    gradient per input with ``requires_grad=True``). ``gradcheck`` then compares the engine's
    gradient of ``g`` (a second derivative: a Hessian-vector product of ``sum(fn · v)`` in the
    direction of its own random upstream, seeded with ``seed + 1``) with central finite
    differences of ``g``. An input that ``fn`` does not use has a zero first derivative there
    (and a zero second derivative). Inputs and outputs are float64. Returns ``True``, or raises
    ``GradcheckError`` naming the input, the element, both values and the tolerances.

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> x = ta.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    >>> y = ta.tensor(np.array([1.5, 0.25, -0.75]), requires_grad=True)
    >>> gradgradcheck(lambda x, y: (x * y.tanh()).exp(), [x, y])
    True
    """
    inputs = list(inputs)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradgradcheck: no input has requires_grad=True, so there is nothing to check")
    for i in checked:
        if inputs[i].dtype != np.float64:
            raise TypeError(
                f"gradgradcheck: input {i} has dtype {inputs[i].dtype}; finite differences need float64 "
                "inputs (convert with .double())"
            )
    with enable_grad():
        outputs = _outputs(fn(*inputs))
    if grad_outputs is None:
        upstreams = [backend.to_device(u, o.device) for o, u in zip(outputs, _upstreams(outputs, seed))]
    else:
        upstreams = [g._data if isinstance(g, Tensor) else g for g in _outputs(grad_outputs)]
        if len(upstreams) != len(outputs):
            raise ValueError(f"gradgradcheck: {len(upstreams)} grad_outputs for {len(outputs)} outputs")
    for k, (o, u) in enumerate(zip(outputs, upstreams)):
        if o.dtype != np.float64:
            raise TypeError(f"gradgradcheck: output {k} has dtype {o.dtype}, expected float64")
        if tuple(u.shape) != o.shape:
            raise ValueError(f"gradgradcheck: grad_outputs[{k}] has shape {tuple(u.shape)}, expected output "
                             f"{k}'s shape {o.shape}")
    if not any(o.requires_grad for o in outputs):
        raise ValueError("gradgradcheck: no output of fn requires grad, so it has no derivative to check")
    vs = [Tensor._wrap(u if u.dtype == np.float64 else u.astype(np.float64)) for u in upstreams]

    def first_derivative(*xs):
        """``(d sum_k(fn_k · v_k) / d x_i for each checked input i)``, as tensors with their own graph."""
        with enable_grad():  # gradcheck evaluates its finite differences under no_grad
            live = [(o, v) for o, v in zip(_outputs(fn(*xs)), vs) if o.requires_grad]
            return grad([o for o, _ in live], [xs[i] for i in checked], [v for _, v in live],
                        create_graph=True, materialize_grads=True)

    try:
        return gradcheck(first_derivative, inputs, eps=eps, atol=atol, rtol=rtol, seed=seed + 1)
    except GradcheckError as error:
        detail = str(error).removeprefix("gradcheck: ")
        raise GradcheckError(
            "gradgradcheck: a second derivative disagrees with finite differences of the first "
            f"(the gradient of sum(grad(fn, inputs, v) * u)): {detail}"
        ) from None


# ----------------------------------------------------------------------------- hypothesis strategies


def shapes(min_dims=0, max_dims=3, min_side=1, max_side=4):
    """Array shapes, small by default (``hypothesis.extra.numpy.array_shapes``).

    A hypothesis strategy: give it to ``@given``, which draws the shapes.

    >>> from hypothesis import find, given, settings
    >>> from hypothesis.strategies import SearchStrategy
    >>> isinstance(shapes(), SearchStrategy)
    True
    >>> @settings(max_examples=5, database=None, derandomize=True)
    ... @given(shapes(max_dims=2, max_side=3))
    ... def check(shape):
    ...     assert len(shape) <= 2 and all(1 <= n <= 3 for n in shape)
    >>> check()
    >>> find(shapes(), lambda shape: len(shape) == 2, settings=settings(database=None, derandomize=True))
    (1, 1)
    """
    from hypothesis.extra import numpy as hnp

    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=4):
    """Tuples of ``num_shapes`` shapes that broadcast together (each may have size-1 axes).

    A hypothesis strategy (``hypothesis.extra.numpy.mutually_broadcastable_shapes``'s input shapes).

    >>> import numpy as np
    >>> from hypothesis import find, given, settings
    >>> @settings(max_examples=5, database=None, derandomize=True)
    ... @given(broadcastable_shapes(num_shapes=3))
    ... def check(shapes):
    ...     assert len(shapes) == 3
    ...     np.broadcast_shapes(*shapes)    # raises if they did not broadcast together
    >>> check()
    >>> find(broadcastable_shapes(), lambda pair: len(pair[0]) == 2 and pair[0] != pair[1],
    ...      settings=settings(database=None, derandomize=True))
    ((1, 1), ())
    """
    from hypothesis.extra import numpy as hnp

    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    ).map(lambda result: result.input_shapes)


def _floats(dtype, low, high):
    """Floats of ``dtype`` in ``[low, high]``, the bounds rounded inwards to ``dtype``."""
    from hypothesis import strategies as st

    kind = np.dtype(dtype).type
    low_, high_ = kind(low), kind(high)
    low_ = low_ if low_ >= low else np.nextafter(low_, kind(np.inf))
    high_ = high_ if high_ <= high else np.nextafter(high_, kind(-np.inf))
    return st.floats(float(low_), float(high_), width=8 * np.dtype(dtype).itemsize, allow_nan=False,
                     allow_infinity=False)


def arrays(shape, dtype=np.float64, low=0.1, high=2.0):
    """NumPy arrays whose elements have ``low <= |x| <= high``, either sign: away from 0 (kinks of relu, abs).

    A hypothesis strategy (``hypothesis.extra.numpy.arrays``) of arrays of ``shape`` and ``dtype``.

    >>> import numpy as np
    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None, derandomize=True)
    ... @given(arrays((2, 3), dtype=np.float32))
    ... def check(a):
    ...     assert a.shape == (2, 3) and a.dtype == np.float32
    ...     assert ((np.abs(a) >= 0.1) & (np.abs(a) <= 2.0)).all()    # never 0: clear of relu's kink
    >>> check()
    """
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    magnitude = _floats(dtype, low, high)
    elements = st.one_of(magnitude, magnitude.map(lambda v: -v))
    return hnp.arrays(np.dtype(dtype), shape, elements=elements)


def positive_arrays(shape, dtype=np.float64, low=0.1, high=2.0):
    """NumPy arrays with elements in ``[low, high]``: safe inputs for log, sqrt, division and powers.

    A hypothesis strategy (``hypothesis.extra.numpy.arrays``) of arrays of ``shape`` and ``dtype``.

    >>> import numpy as np
    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None, derandomize=True)
    ... @given(positive_arrays((4,), low=0.5, high=3.0))
    ... def check(a):
    ...     assert a.shape == (4,) and a.dtype == np.float64
    ...     assert ((a >= 0.5) & (a <= 3.0)).all()
    ...     assert np.isfinite(np.log(a)).all()
    >>> check()
    """
    from hypothesis.extra import numpy as hnp

    return hnp.arrays(np.dtype(dtype), shape, elements=_floats(dtype, low, high))


def distinct_arrays(shape, dtype=np.float64, spacing=0.25):
    """NumPy arrays whose elements differ pairwise by at least ``spacing`` and are never 0: no ties, no kinks.

    A hypothesis strategy: each array holds the same values, ``spacing`` apart and centred on 0, in an order
    that hypothesis draws (so a max, sort or top-k has one answer and a finite difference does not cross a tie).

    >>> import numpy as np
    >>> from hypothesis import find, given, settings
    >>> @settings(max_examples=5, database=None, derandomize=True)
    ... @given(distinct_arrays((2, 3)))
    ... def check(a):
    ...     assert a.shape == (2, 3) and (a != 0).all()
    ...     assert np.diff(np.sort(a.ravel())).min() >= 0.25
    >>> check()
    >>> a = find(distinct_arrays((2, 2)), lambda a: True, settings=settings(database=None, derandomize=True))
    >>> np.sort(a.ravel())
    array([-0.375, -0.125,  0.125,  0.375])
    """
    from hypothesis import strategies as st

    n = int(np.prod(shape))
    return st.permutations(range(n)).map(
        lambda order: ((np.array(order, dtype=np.float64) - n // 2 + 0.5) * spacing).astype(dtype).reshape(shape)
    )
