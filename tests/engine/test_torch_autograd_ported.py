"""Cases of PyTorch's own autograd tests, ported: each names the test it comes from, and where PyTorch computes an
answer it is run beside ours (``_run_both``: the same function, written once, run with ``tinyattn`` and with
``torch``; ``tinyattn.compat`` where the case needs ``.grad`` to be a tensor with a graph).

From ``test/test_autograd.py`` (``TestAutograd``: gradient accumulation, ``retain_graph``, hooks, the grad modes,
``requires_grad`` propagation, ``detach``, ``backward(inputs=)``, ``autograd.grad``'s ``allow_unused`` and
``materialize_grads``, ``create_graph``; ``TestAutogradForwardMode``; ``TestAutogradInferenceMode``, the cases that
do not need inference tensors) and from ``test/autograd/test_functional.py`` (``TestAutogradFunctional``: ``vjp``,
``jvp``, ``vhp``, ``hvp``, ``jacobian``, ``hessian``). PyTorch's error messages are matched without regard to case
(tinyattn's begin with the function's name), and ``torch.Size`` is PyTorch's own spelling of a shape. A case marked
``xfail(strict=True)`` is one where tinyattn does not do what PyTorch's test asserts; its reason says how the two
differ.
"""

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.autograd.forward_ad as fwAD
import tinyattn.compat as tc
from tinyattn.testing import gradcheck, gradgradcheck


def _arrays(*shapes, seed=0, low=None):
    """Float64 arrays of ``shapes``, the same on every run: standard normal, or uniform in ``[low, low + 1)``."""
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(shape) if low is None else low + rng.random(shape), dtype=np.float64)
            for shape in shapes]


def _run_both(build, *arrays, ours=ta):
    """``build(lib, *tensors)`` run with ``ours`` (``tinyattn``, or ``tinyattn.compat``) on tensors of ``arrays``, then
    with ``torch``: ``(ours, theirs)``."""
    return build(ours, *[ours.tensor(a) for a in arrays]), build(torch, *[torch.tensor(a) for a in arrays])


def _np(t):
    """A tensor of either library (or a native ``.grad`` array, or a number) as a NumPy array."""
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    if isinstance(t, ta.Tensor):
        return t.numpy()
    return np.asarray(t)


def _close(ours, theirs, rtol=1e-10, atol=1e-12):
    """Two results with the same tree (tuples, lists) of tensors of the same shapes and values; ``theirs`` may hold
    NumPy arrays or numbers, ``ours`` native ``.grad`` arrays."""
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, type(theirs)) and len(ours) == len(theirs), (ours, theirs)
        for o, t in zip(ours, theirs):
            _close(o, t, rtol, atol)
    else:
        assert isinstance(ours, (ta.Tensor, np.ndarray)), f"expected a tensor, got {type(ours).__name__}"
        assert np.shape(_np(ours)) == np.shape(_np(theirs)), (np.shape(_np(ours)), np.shape(_np(theirs)))
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=atol)


def _zero_(t):
    """``t.grad.zero_()``, in place, for a native ``.grad`` (an array) as for torch's."""
    if isinstance(t, torch.Tensor):
        t.grad.zero_()
    else:
        t.grad[...] = 0


def _ones(lib, *shape):
    return lib.ones(*shape, dtype=lib.float64)


def _raises(exception, message):
    """``pytest.raises`` for PyTorch's message, matched without regard to case."""
    return pytest.raises(exception, match="(?i)" + message)


# ----------------------------------------------------------------------------- TestAutograd: accumulation, create_graph


def test_accumulate_grad():
    """``TestAutograd.test_accumulate_grad``: a second ``backward`` adds into ``.grad`` in place; with
    ``create_graph`` out of place (the ``.grad`` held from before is unchanged)."""
    (x0,) = _arrays((5, 5))
    for lib in (ta, torch):
        def compute_grad(create_graph, lib=lib):
            x = lib.tensor(x0, requires_grad=True)
            y = x + 2
            y.backward(_ones(lib, 5, 5), retain_graph=True)
            x_grad = x.grad
            x_grad_clone = _np(x.grad).copy()
            y.backward(_ones(lib, 5, 5), create_graph=create_graph)
            return _np(x_grad), x_grad_clone

        x_grad, x_grad_clone = compute_grad(create_graph=False)
        np.testing.assert_array_equal(x_grad, x_grad_clone * 2)
        x_grad, x_grad_clone = compute_grad(create_graph=True)
        np.testing.assert_array_equal(x_grad, x_grad_clone)


def test_hessian_vector():
    """``TestAutograd.test_hessian_vector`` (through ``tinyattn.compat``, whose ``.grad`` after
    ``backward(create_graph=True)`` is a tensor with its graph): ``backward`` of ``2 x.grad + y.grad`` adds the
    Hessian-vector products ``5`` and ``4``."""
    def build(lib, x, y):
        x.requires_grad_(True)
        y.requires_grad_(True)
        z = x ** 2 + y * x + y ** 2
        z.backward(_ones(lib, 2, 2), create_graph=True)
        first = (_np(x.grad).copy(), _np(y.grad).copy())
        grad_sum = 2 * x.grad + y.grad
        grad_sum.backward(_ones(lib, 2, 2))
        return first, (_np(x.grad).copy(), _np(y.grad).copy())

    x, y = _arrays((2, 2), (2, 2), seed=1)
    ours, theirs = _run_both(build, x, y, ours=tc)
    _close(ours, theirs)
    _close(ours, ((2 * x + y, x + 2 * y), (2 * x + y + 5, x + 2 * y + 4)))


def test_grad():
    """``TestAutograd.test_grad`` (through ``tinyattn.compat``): ``autograd.grad`` of ``2 x.grad + y.grad`` gives the
    Hessian-vector product and leaves ``.grad`` alone; a ``grad_outputs`` of another shape raises."""
    def build(lib, x, y):
        x.requires_grad_(True)
        y.requires_grad_(True)
        z = x ** 2 + y * x + y ** 2
        z.backward(_ones(lib, 2, 2), create_graph=True)
        grad_sum = 2 * x.grad + y.grad
        (x_hv,) = lib.autograd.grad(outputs=[grad_sum], grad_outputs=[_ones(lib, 2, 2)], inputs=[x], create_graph=True)
        with _raises(RuntimeError, "shape"):
            lib.autograd.grad(outputs=[grad_sum], grad_outputs=[_ones(lib, 2)], inputs=[x], create_graph=True)
        return _np(x_hv).copy(), _np(x.grad).copy(), _np(y.grad).copy()

    x, y = _arrays((2, 2), (2, 2), seed=2)
    ours, theirs = _run_both(build, x, y, ours=tc)
    _close(ours, theirs)
    _close(ours, (np.full((2, 2), 5.0), 2 * x + y, x + 2 * y))


def test_grad_nonleaf():
    """``TestAutograd.test_grad_nonleaf``: five steps of gradient ascent on a non-leaf, each gradient taken with
    ``create_graph``; no ``.grad`` is touched until ``backward`` through all of them reaches the leaves."""
    def build(lib, x_init, y):
        x_init.requires_grad_(True)
        y.requires_grad_(True)
        x = x_init
        grad_output = _ones(lib, 2, 2)

        def fn(x):
            return x ** 2 + y * x + y ** 2

        for _ in range(5):
            (grad_x,) = lib.autograd.grad(fn(x), x, grad_outputs=grad_output, create_graph=True)
            assert y.grad is None and x.grad is None
            _close(_np(grad_x), _np(2 * x + y))
            x = x + 0.05 * grad_x
        assert fn(x).sum() > fn(x_init).sum()
        x.backward(grad_output)
        assert y.grad is not None and x_init.grad is not None
        return _np(x).copy(), _np(x_init.grad).copy(), _np(y.grad).copy()

    ours, theirs = _run_both(build, *_arrays((2, 2), (2, 2), seed=3))
    _close(ours, theirs)


def test_grad_nonleaf_many_outputs():
    """``TestAutograd.test_grad_nonleaf_many_outputs``: ``autograd.grad`` with respect to two chunks of a leaf runs
    no hook of the leaf and leaves its ``.grad`` alone."""
    def build(lib, x, go):
        x.requires_grad_(True)
        a, b = x.chunk(2)
        hook_called = [False]
        x.register_hook(lambda *grads: hook_called.__setitem__(0, True))
        grad_a, grad_b = lib.autograd.grad((a + 2 * b), [a, b], grad_outputs=go, create_graph=True)
        assert not hook_called[0]
        assert x.grad is None
        return grad_a, grad_b

    x, go = _arrays((4, 2), (2, 2), seed=4)
    ours, theirs = _run_both(build, x, go)
    _close(ours, theirs)
    _close(ours, (go, 2 * go))


def test_grad_nonleaf_register_hook():
    """``TestAutograd.test_grad_nonleaf_register_hook``: a hook on one of a leaf's ``unbind`` outputs sees its
    gradient; ``backward`` from each output adds a one to its place of the leaf's ``.grad``; the outputs keep no
    ``.grad``. (PyTorch's test also asserts that the hook is then called with ``None`` when the other outputs of the
    same multi-output node are walked: a detail of its ``UnbindBackward`` node, which tinyattn's ``unbind``, one
    node per output, does not have.)"""
    def build(lib, x):
        x.requires_grad_(True)
        x_list = x.unbind()
        hook_results = [None]
        x_list[0].register_hook(lambda grad: hook_results.__setitem__(0, grad))
        x_list[0].backward()
        results = [_np(hook_results[0]).copy(), _np(x.grad).copy()]
        assert x_list[0].grad is None
        for i in range(1, 5):
            x_list[i].backward()
            results.append(_np(x.grad).copy())
            assert x_list[i].grad is None
        return results

    ours, theirs = _run_both(build, *_arrays(5, seed=5))
    _close(ours, theirs)
    _close(ours, [1.0] + [np.array([1.0] * (i + 1) + [0.0] * (4 - i)) for i in range(5)])


def test_backward_and_grad_badcalls():
    """``TestAutograd.test_backward_badcalls`` and ``test_grad_badcalls``: a tensor that does not require grad has
    no ``backward``, and is neither an output nor an input of ``autograd.grad``."""
    for lib in (ta, torch):
        x = lib.ones(1)
        with _raises(RuntimeError, "does not require grad"):
            x.backward()
        y = x ** 2
        with _raises(RuntimeError, "does not require grad"):
            lib.autograd.grad(x, y)
        with _raises(RuntimeError, "does not require grad"):
            lib.autograd.grad(y, x)
        x = lib.ones(1, requires_grad=True)
        lib.autograd.grad(x ** 2, x)  # this should succeed now


def test_grad_unreachable_and_materialize_grads():
    """``TestAutograd.test_grad_unreachable`` (an input the output does not reach gets ``None`` with
    ``allow_unused``, else ``RuntimeError``) and ``test_unused_grad_requires_grad_with_materialize`` (materialized
    zeros carry no graph)."""
    for lib in (ta, torch):
        x, y = lib.ones(1, requires_grad=True), lib.ones(1, requires_grad=True)
        _ = x * 2, y * 2  # (gradient accumulators made, in PyTorch)
        grad_x, grad_y = lib.autograd.grad(x * 2, [x, y], allow_unused=True)
        assert _np(grad_x).tolist() == [2.0] and grad_y is None
        z = lib.ones(1, requires_grad=True)
        grad_x, grad_z = lib.autograd.grad(x * 2, [x, z], allow_unused=True)
        assert _np(grad_x).tolist() == [2.0] and grad_z is None
        with _raises(RuntimeError, "allow_unused=True"):
            lib.autograd.grad(x * 2, [x, y], allow_unused=False)

        x, y = lib.ones(10, requires_grad=True), lib.ones(10, requires_grad=True)
        g = lib.autograd.grad((x ** 2).sum(), (x, y), allow_unused=True, materialize_grads=True, create_graph=False)
        assert not g[0].requires_grad and not g[1].requires_grad
        assert _np(g[1]).tolist() == [0.0] * 10


# ----------------------------------------------------------------------------- TestAutograd: hooks, retain_grad


def test_hooks():
    """``TestAutograd.test_hooks``: hooks on a leaf and a non-leaf are called once per walk with a tensor; a removed
    hook no more; a hook that returns a tensor replaces the gradient, on a non-leaf and on a leaf."""
    def build(lib):
        x = lib.ones(5, 5, requires_grad=True)
        y = lib.ones(5, 5) * 4
        y.requires_grad_(True)
        counter = [0]

        def bw_hook(inc, grad):
            assert isinstance(grad, lib.Tensor)
            counter[0] += inc

        z = x ** 2 + x * 2 + x * y + y
        x.register_hook(lambda *args: bw_hook(0, *args))
        test = z.register_hook(lambda *args: bw_hook(1, *args))
        z.backward(lib.ones(5, 5), retain_graph=True)
        counts = [counter[0]]
        test2 = z.register_hook(lambda *args: bw_hook(2, *args))
        z.backward(lib.ones(5, 5), retain_graph=True)
        counts.append(counter[0])
        test2.remove()
        z.backward(lib.ones(5, 5), retain_graph=True)
        counts.append(counter[0])

        def bw_hook_modify(grad):
            return grad.mul(2)

        test.remove()
        z.register_hook(bw_hook_modify)
        _zero_(y)
        z.backward(lib.ones(5, 5), retain_graph=True)
        modified_once = _np(y.grad).copy()
        y.register_hook(bw_hook_modify)
        _zero_(y)
        z.backward(lib.ones(5, 5))
        return counts, modified_once, _np(y.grad).copy()

    ours, theirs = build(ta), build(torch)
    assert ours[0] == theirs[0] == [1, 4, 5]
    _close(ours[1:], theirs[1:])
    _close(ours[1:], (np.full((5, 5), 4.0), np.full((5, 5), 8.0)))  # (x + 1) * 2, (x + 1) * 4


def test_retain_grad():
    """``TestAutograd.test_retain_grad``: ``retain_grad`` (twice is as once) keeps a non-leaf's gradient, summed over
    walks; on a leaf it changes nothing."""
    def build(lib, input):
        input.requires_grad_(True)
        h1 = input * 3
        out = (h1 * h1).sum()
        h1.retain_grad()
        h1.retain_grad()
        out.backward(retain_graph=True)
        results = [_np(h1.grad).copy()]
        out.backward(retain_graph=True)
        results.append(_np(h1.grad).copy())
        _zero_(input)
        input.retain_grad()
        input.retain_grad()
        out.backward()
        return results + [_np(input.grad).copy(), _np(h1).copy()]

    (x,) = _arrays((1, 3), seed=6, low=0.0)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    h1 = ours[3]
    _close(ours[:3], [h1 * 2, h1 * 4, x * 18])


# ----------------------------------------------------------------------------- TestAutograd: backward, inputs=


def test_backward():
    """``TestAutograd.test_backward``: ``backward`` on a leaf gives it the upstream gradient; through an expression,
    its analytic gradients."""
    def build(lib, v, x, y, z, grad_output):
        for t in (v, x, y, z):
            t.requires_grad_(True)
        v.backward(grad_output)
        a = x + (y * z) + 4 * z ** 2 * x / y
        a.backward(grad_output)
        return v.grad, x.grad, y.grad, z.grad

    v, x, y, z, g = _arrays((5, 5), (5, 5), (5, 5), (5, 5), (5, 5), seed=7)
    y = 0.1 + np.abs(y)
    ours, theirs = _run_both(build, v, x, y, z, g)
    _close(ours, theirs)
    _close(ours, (g, (4 * z ** 2 / y + 1) * g, (z - 4 * x * z ** 2 / y ** 2) * g, (8 * x * z / y + y) * g))


def test_backward_with_inputs():
    """``TestAutograd.test_backward_with_inputs`` (``torch.autograd.backward(..., inputs=)`` as ``Tensor.backward``):
    only the tensors named in ``inputs`` get a gradient; ``inputs=[]`` raises."""
    def build(lib, x, y):
        x.requires_grad_(True)
        y.requires_grad_(True)
        fn = lambda: x ** 2 + y * x + y ** 2
        gradient = _ones(lib, 2, 2)
        results = []
        fn().backward(gradient, inputs=[x, y])
        results.append((_np(x.grad).copy(), _np(y.grad).copy()))
        for inputs in ([x], [y], y):
            _zero_(x)
            _zero_(y)
            fn().backward(gradient, inputs=inputs)
            results.append((_np(x.grad).copy(), _np(y.grad).copy()))
        with _raises(RuntimeError, "empty"):
            fn().backward(gradient, inputs=[])
        return results

    x, y = _arrays((2, 2), (2, 2), seed=8)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    gx, gy, zeros = 2 * x + y, x + 2 * y, np.zeros((2, 2))
    _close(ours, [(gx, gy), (gx, zeros), (zeros, gy), (zeros, gy)])


def test_backward_with_scalar_input():
    """``TestAutograd.test_backward_with_scalar_input``: ``inputs`` may be one 0-d tensor."""
    for lib in (torch, ta):  # (torch first: it passes)
        x = lib.tensor(_arrays((), seed=9)[0], requires_grad=True)
        (x ** 2).backward(inputs=x)
        _close(_np(x.grad), 2 * _np(x))


def test_backward_with_nonleaf_inputs():
    """``TestAutograd.test_backward_with_nonleaf_inputs``: ``inputs`` may be non-leaves (which then get a
    ``.grad``); a tensor outside the graph is left ``None``."""
    def build(lib, x, y, z):
        for t in (x, y, z):
            t.requires_grad_(True)
        x_nonleaf = x * 1
        out = x_nonleaf ** 2 + y * x_nonleaf + y ** 2
        out.backward(_ones(lib, 2, 2), create_graph=True, inputs=[x, y, x_nonleaf])
        out.backward(_ones(lib, 2, 2), create_graph=True, inputs=[z])
        assert z.grad is None
        return tuple(_np(t.grad).copy() for t in (x, y, x_nonleaf))

    x, y, z = _arrays((2, 2), (2, 2), (2, 2), seed=9)
    ours, theirs = _run_both(build, x, y, z)
    _close(ours, theirs)
    _close(ours, (2 * x + y, x + 2 * y, 2 * x + y))


def _index_into_zeros(lib, b0):
    b = lib.tensor(b0, requires_grad=True)
    c = lib.zeros(3, dtype=lib.float64)
    c[[1, 2]] = b[[1, 1]]
    return b, c


def test_backward_twice_retained_graph_with_saved_values():
    """``TestAutograd.test_backward_twice_retained_graph_with_saved_values``: with ``retain_graph=True`` the first
    time, a second walk through an index runs, and adds its gradient again."""
    for lib in (ta, torch):
        b, c = _index_into_zeros(lib, _arrays(3, seed=10)[0])
        c.backward(lib.tensor([1, 1, 1], dtype=lib.float64), retain_graph=True)
        c.backward(lib.tensor([1, 1, 1], dtype=lib.float64))
        assert _np(b.grad).tolist() == [0.0, 4.0, 0.0]


def test_backward_twice_with_saved_values():
    """``TestAutograd.test_backward_twice_with_saved_values``: a second walk through an index that saved its
    indices needs ``retain_graph=True`` the first time."""
    for lib in (torch, ta):  # (torch first: it passes)
        b, c = _index_into_zeros(lib, _arrays(3, seed=10)[0])
        c.backward(lib.tensor([1, 1, 1], dtype=lib.float64))
        with _raises(RuntimeError, "retain_graph=True"):
            c.backward(lib.tensor([1, 1, 1], dtype=lib.float64))


# ----------------------------------------------------------------------------- TestAutograd: grad modes


def test_no_grad():
    """``TestAutograd.test_no_grad``: ``no_grad`` as a context manager and a decorator (``no_grad()(f)`` and
    ``no_grad(f)``): no graph, no ``backward``; nested, the mode stays off."""
    for lib in (ta, torch):
        x = lib.ones(5, 5, requires_grad=True)
        y = lib.ones(5, 5) * 4
        with lib.no_grad():
            w = x + y

        def adder(x, y):
            return x + y

        for decorated in [lib.no_grad()(adder), lib.no_grad(adder)]:
            z = decorated(x, y)
            assert not w.requires_grad and w.grad_fn is None
            with pytest.raises(RuntimeError):
                w.backward(lib.ones(5, 5))
            assert not z.requires_grad and z.grad_fn is None
            with pytest.raises(RuntimeError):
                z.backward(lib.ones(5, 5))
        with lib.no_grad():
            assert not lib.is_grad_enabled()
            w = decorated(x, y)
            assert not lib.is_grad_enabled()


def test_enable_grad_decorator_no_paren_and_set_grad_enabled():
    """``TestAutograd.test_enable_grad_decorator_no_paren`` (``@enable_grad`` bare records under ``no_grad``) and
    ``test_set_grad_enabled`` (as a context manager, and called inside one)."""
    for lib in (ta, torch):
        x = lib.ones(1, requires_grad=True)

        @lib.enable_grad
        def doubler(x):
            return x * 2

        with lib.no_grad():
            assert doubler(x).requires_grad
        with lib.set_grad_enabled(False):
            y = x * 2
        assert not y.requires_grad
        with lib.set_grad_enabled(True):
            y = x * 2
        assert y.requires_grad
        with lib.set_grad_enabled(False):
            lib.set_grad_enabled(True)
            y = x * 2
        assert y.requires_grad
        assert lib.is_grad_enabled()


@pytest.mark.parametrize("kind", ["generator", "coroutine"])
def test_set_grad_generator_functions_and_coroutines(kind):
    """``TestAutograd.test_set_grad_generator_functions`` and ``test_set_grad_coroutines``: a decorated generator
    runs its body in the decorator's mode, and the caller's mode is unchanged between steps."""
    for lib in (torch, ta):  # (torch first: it passes)
        @lib.no_grad()
        def gen_no_grad(lib=lib):
            for i in range(10):
                assert not lib.is_grad_enabled()
                received = yield i
                assert received in (None, i) and not lib.is_grad_enabled()

        @lib.enable_grad()
        def gen_enable_grad(lib=lib):
            for i in range(10):
                assert lib.is_grad_enabled()
                received = yield i
                assert received in (None, i) and lib.is_grad_enabled()

        for outer, gen, outer_mode in ((lib.enable_grad, gen_no_grad, True), (lib.no_grad, gen_enable_grad, False)):
            with outer():
                if kind == "generator":
                    for _ in gen():
                        assert lib.is_grad_enabled() is outer_mode
                else:
                    coro, r = gen(), None
                    try:
                        while True:
                            r = coro.send(r)
                            assert lib.is_grad_enabled() is outer_mode
                    except StopIteration:
                        pass


def _check_grad_modes_recursive(lib):
    @lib.enable_grad()
    def enable_grad_decorator_recursive(depth):
        assert lib.is_grad_enabled()
        if depth > 0:
            no_grad_decorator_recursive(depth - 1)
            assert lib.is_grad_enabled()

    @lib.no_grad()
    def no_grad_decorator_recursive(depth):
        assert not lib.is_grad_enabled()
        if depth > 0:
            enable_grad_decorator_recursive(depth - 1)
            assert not lib.is_grad_enabled()

    def enable_grad_context_manager_recursive(depth):
        with lib.enable_grad():
            assert lib.is_grad_enabled()
            if depth > 0:
                no_grad_context_manager_recursive(depth - 1)
                assert lib.is_grad_enabled()

    def no_grad_context_manager_recursive(depth):
        with lib.no_grad():
            assert not lib.is_grad_enabled()
            if depth > 0:
                enable_grad_context_manager_recursive(depth - 1)
                assert not lib.is_grad_enabled()

    for mode, expected in ((lib.enable_grad, True), (lib.no_grad, False)):
        with mode():
            enable_grad_decorator_recursive(10)
            assert lib.is_grad_enabled() is expected
            enable_grad_context_manager_recursive(10)
            assert lib.is_grad_enabled() is expected


def test_set_grad_generator_functions_recursive():
    """``TestAutograd.test_set_grad_generator_functions_recursive``: decorated functions and context managers that
    call each other, to depth 10, each restore the caller's mode."""
    for lib in (ta, torch):
        _check_grad_modes_recursive(lib)


def test_no_grad_python_function():
    """``TestAutograd.test_no_grad_python_function``: an ``autograd.Function`` applied under ``no_grad`` records
    nothing."""
    for lib in (ta, torch):
        class MyOp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x + 1

            @staticmethod
            def backward(ctx, dy):
                return dy

        x = lib.ones(5, 5, requires_grad=True)
        with lib.no_grad():
            y = MyOp.apply(x)
        assert not y.requires_grad


# ----------------------------------------------------------------------------- TestAutograd: requires_grad, detach


def test_requires_grad():
    """``TestAutograd.test_requires_grad`` (without its check on ``_backward_hooks``): a result requires grad when
    an input does."""
    for lib in (ta, torch):
        x, y, z = lib.randn(5, 5), lib.randn(5, 5), lib.randn(5, 5, requires_grad=True)
        a = x + y
        assert not a.requires_grad
        b = a + z
        assert b.requires_grad
        b.backward(lib.ones(5, 5))
        assert _np(z.grad).tolist() == np.ones((5, 5)).tolist() and x.grad is None


def test_requires_grad_on_leaves():
    """``TestAutograd.test_requires_grad_`` (the leaves; the refusal on a non-leaf is ported as
    ``tests/func/test_torch_ported.py::test_requires_grad_false_on_a_non_leaf_is_refused``): ``requires_grad_``
    returns the tensor, on and off."""
    for lib in (ta, torch):
        x, y = lib.randn(5, 5), lib.randn(5, 5, requires_grad=True)
        for t in (x, y):
            assert t.requires_grad_() is t and t.requires_grad
            assert t.requires_grad_(True) is t and t.requires_grad
        z = x * y
        assert z.requires_grad_() is z and z.requires_grad
        for t in (x, y):
            assert t.requires_grad_(False) is t and not t.requires_grad


def test_detach():
    """``TestAutograd.test_detach``: a detached tensor starts no graph; ``detach_`` cuts a non-leaf in place (what is
    computed from it later does not reach its inputs); a view of a leaf that requires grad cannot ``detach_``
    (``narrow`` written as a slice)."""
    def build(lib, x0, y0):
        x = x0.clone().requires_grad_(True)
        y = (x + 2).detach()
        z = y * 4 + 2
        assert not y.requires_grad and not z.requires_grad
        y = (x * 2).detach()
        assert not y.requires_grad and y.grad_fn is None
        (x + y).sum().backward()
        first = _np(x.grad).copy()
        x, y = x0.clone().requires_grad_(True), y0.clone().requires_grad_(True)
        a = x * 2
        (y + a).sum().backward(retain_graph=True)
        a.detach_()
        assert not a.requires_grad
        (y + a).sum().backward()  # this won't backprop to x
        view = x[1:5]
        with _raises(RuntimeError, "view"):
            view.detach_()
        return first, _np(x.grad).copy(), _np(y.grad).copy()

    ours, theirs = _run_both(build, *_arrays((10, 10), (10, 10), seed=11))
    _close(ours, theirs)
    _close(ours, (np.ones((10, 10)), np.full((10, 10), 2.0), np.full((10, 10), 2.0)))


def test_detach_base_and_then_inplace():
    """``TestAutograd.test_detach_base`` (detaching the base does not detach a view of it; PyTorch's check of
    ``view._base`` is left out, tinyattn has no public ``_base``) and
    ``test_detach_then_inplace_raises_in_autograd`` (a write through a detached alias is seen by the node that
    saved the tensor)."""
    for lib in (ta, torch):
        x = lib.randn(10, 10, requires_grad=True)
        view = x[1:5]
        x.detach_()
        assert not x.requires_grad
        assert view.requires_grad and view.grad_fn is not None

        x = lib.randn((), requires_grad=True)
        y = x ** 2  # saves x
        z = x.detach()
        z.zero_()
        with _raises(RuntimeError, "modified by an in-?place"):
            y.backward()


# ----------------------------------------------------------------------------- TestAutograd: custom functions, shapes


def test_mark_non_differentiable_mixed_and_undefined_gradients():
    """``TestAutograd.test_mark_non_differentiable_mixed`` (a non-differentiable output needs no gradient, and its
    backward receives zeros for it) and ``test_function_returns_undefined_tensor`` (a backward that returns ``None``
    leaves ``.grad`` ``None``)."""
    for lib in (ta, torch):
        class MyFunction(lib.autograd.Function):
            @staticmethod
            def forward(ctx, input):
                a, b = input + 1, input + 2
                ctx.mark_non_differentiable(a)
                return a, b

            @staticmethod
            def backward(ctx, grad_a, grad_b):
                assert (grad_a == 0).all() and (grad_b == 1).all()
                return grad_b

        x = lib.randn(5, 5, requires_grad=True)
        a, b = MyFunction.apply(x)
        assert not a.requires_grad and b.requires_grad
        b.sum().backward()
        assert _np(x.grad).tolist() == np.ones((5, 5)).tolist()

        class Undefined(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return None

        x = lib.ones(1, requires_grad=True)
        Undefined.apply(x).backward()
        Undefined.apply(x ** 2).backward()
        Undefined.apply(x).sum().backward()
        assert x.grad is None
        assert lib.autograd.grad(Undefined.apply(x), x, allow_unused=True)[0] is None


def test_stack_and_unused_output():
    """``TestAutograd.test_stack`` (each input gets its slice of the gradient) and ``test_unused_output`` (a chunk
    that is not used gets zeros)."""
    def build(lib, x, y, z, grad, w, grad_output):
        for t in (x, y, z, w):
            t.requires_grad_(True)
        lib.stack([x, y, z], 0).backward(grad)
        o = w.chunk(5)[2]
        (o * 4 + 2).sum().backward()
        first = _np(w.grad).copy()
        _zero_(w)
        w.chunk(5)[0].backward(grad_output)
        return x.grad, y.grad, z.grad, first, _np(w.grad).copy()

    x, y, z, g, w, go = _arrays((10, 10), (10, 10), (10, 10), (3, 10, 10), (10, 10), (2, 10), seed=12)
    ours, theirs = _run_both(build, x, y, z, g, w, go)
    _close(ours, theirs)
    expected_chunk, expected_first = np.zeros((10, 10)), np.zeros((10, 10))
    expected_chunk[4:6] = 4
    expected_first[:2] = go
    _close(ours, (g[0], g[1], g[2], expected_chunk, expected_first))


# ----------------------------------------------------------------------------- TestAutogradInferenceMode


def test_inference_mode_context_manager():
    """``TestAutogradInferenceMode.test_inference_mode_context_manager``: ``inference_mode(False)`` turns inference
    mode off inside ``inference_mode()``, and each exit puts back what it found."""
    for lib in (torch, ta):  # (torch first: it passes)
        assert not lib.is_inference_mode_enabled()
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled()
            with lib.inference_mode(False):
                assert not lib.is_inference_mode_enabled()
            assert lib.is_inference_mode_enabled()
        assert not lib.is_inference_mode_enabled()


def test_inference_mode_decorator_and_functional_op():
    """``TestAutogradInferenceMode.test_inference_mode_decorator`` and
    ``test_inference_mode_inf_tensor_in_inf_mode_functional_op`` (without ``torch.is_inference``: tinyattn has no
    inference tensors): inside, the mode is on and results do not require grad."""
    for lib in (ta, torch):
        @lib.inference_mode()
        def func(x, lib=lib):
            assert lib.is_inference_mode_enabled()
            return x * x

        for requires_grad in (True, False):
            c = lib.ones(1, 2, 3, requires_grad=requires_grad)
            assert not func(c).requires_grad
            with lib.inference_mode():
                assert not (c * c).requires_grad


def test_inference_mode_existing_autograd_session():
    """``TestAutogradInferenceMode.test_inference_mode_existing_autograd_session``: a tensor saved for backward
    outside ``inference_mode`` and written in place inside it is caught by the walk."""
    for lib in (ta, torch):
        s = lib.ones(1, 2, 3, requires_grad=True)
        a = s.clone()
        out = a * a  # `a` gets saved outside of inference mode
        with lib.inference_mode():
            a.add_(2)
        with _raises(RuntimeError, "modified by an in-?place"):
            out.backward(lib.ones_like(out))


# ----------------------------------------------------------------------------- TestAutogradForwardMode


def test_default_level_and_basic_packing():
    """``TestAutogradForwardMode.test_default_level``, ``test_basic_packing_unpacking`` and the valid call of
    ``test_size_check``: ``unpack_dual`` gives the primal and the very tangent ``make_dual`` took, and no tangent
    once the level is closed or for a tensor that is not dual."""
    for lib, ad in ((ta, fwAD), (torch, torch.autograd.forward_ad)):
        foo, bar = lib.rand(2), lib.rand(2)
        with ad.dual_level():
            baz = ad.make_dual(foo, bar)
            baz_primal, baz_tangent = ad.unpack_dual(baz)
            assert _np(baz_primal).tolist() == _np(foo).tolist() and baz_tangent is bar
            foo_primal, foo_tangent = ad.unpack_dual(foo)
            assert _np(foo_primal).tolist() == _np(foo).tolist() and foo_tangent is None
            tangent = lib.rand(3)
            ad.make_dual(foo, tangent[1:])
        assert baz_tangent is bar
        baz_primal, baz_tangent = ad.unpack_dual(baz)
        assert _np(baz_primal).tolist() == _np(foo).tolist() and baz_tangent is None


def test_size_check():
    """``TestAutogradForwardMode.test_size_check``: a tangent of another size raises ``RuntimeError``."""
    for lib, ad in ((torch, torch.autograd.forward_ad), (ta, fwAD)):  # (torch first: it passes)
        with ad.dual_level():
            with pytest.raises(RuntimeError):
                ad.make_dual(lib.rand(2), lib.rand(3))


def test_advanced_packing_unpacking():
    """``TestAutogradForwardMode.test_advanced_packing_unpacking`` (backward through packing and unpacking, then
    ``detach`` and ``no_grad``; its storage and version-counter checks are left out): the primal's gradient reaches
    the primal alone, the tangent's the tangent alone; ``detach`` drops the tangent; under ``no_grad`` tangents are
    still computed, without a graph."""
    for lib, ad in ((ta, fwAD), (torch, torch.autograd.forward_ad)):
        foo, bar = lib.rand(2, dtype=lib.float64), lib.ones(2, dtype=lib.float64)
        with ad.dual_level():
            foo.requires_grad_()
            bar.requires_grad_()
            dual = ad.make_dual(foo, bar)
            p, t = ad.unpack_dual(dual)
            gfoo, gbar = lib.autograd.grad(p.sum(), (foo, bar), retain_graph=True, allow_unused=True)
            assert _np(gfoo).tolist() == [1.0, 1.0] and gbar is None
            gfoo, gbar = lib.autograd.grad(t.sum(), (foo, bar), retain_graph=True, allow_unused=True)
            assert gfoo is None and _np(gbar).tolist() == [1.0, 1.0]

            p, t = ad.unpack_dual(dual.detach() * 2)
            assert not p.requires_grad and t is None
            _close(_np(p), _np(foo) * 2)

            with lib.no_grad():
                out = dual * 3
            p, t = ad.unpack_dual(out)
            assert not p.requires_grad and not t.requires_grad
            _close((_np(p), _np(t)), (_np(foo) * 3, _np(bar) * 3))


def test_in_place_detach_drops_the_tangent():
    """``TestAutogradForwardMode.test_advanced_packing_unpacking`` (its last check): after ``detach_`` a dual tensor
    has no tangent."""
    for lib, ad in ((torch, torch.autograd.forward_ad), (ta, fwAD)):  # (torch first: it passes)
        foo, bar = lib.rand(2, dtype=lib.float64, requires_grad=True), lib.ones(2, dtype=lib.float64)
        with ad.dual_level():
            dual = ad.make_dual(foo, bar).clone()
            dual.detach_()
            p, t = ad.unpack_dual(dual * 2)
            assert not p.requires_grad and t is None


def test_view_inplace_differentiable_views():
    """``TestAutogradForwardMode.test_view_inplace_differentiable_views`` (its first part; ``narrow`` written as a
    slice): an in-place write through a view of a dual updates the dual's tangent, not the tangent of the primal it
    was made from."""
    for lib, ad in ((torch, torch.autograd.forward_ad), (ta, fwAD)):  # (torch first: it passes)
        foo, bar = lib.rand(2, dtype=lib.float64), lib.ones(2, dtype=lib.float64)
        with ad.dual_level():
            dual = ad.make_dual(foo, bar)
            view = dual[0:1]
            view *= 2
            assert ad.unpack_dual(foo)[1] is None
            assert _np(ad.unpack_dual(dual)[1]).tolist() == [2.0, 1.0]
            assert _np(ad.unpack_dual(view)[1]).tolist() == [2.0]


@pytest.mark.parametrize("use", ["written", "read", "base written"])
def test_a_view_sees_a_write_through_a_sibling_view(use):
    """PyTorch's rule for views (``TestAutograd``'s in-place-on-view cases, here with two views of one base): a
    view's history is regenerated from its base after a write through another view, for a write through it and
    for a read of it."""
    def build(lib, foo):
        foo.requires_grad_()
        x = foo * 1
        a, b = x.view(2), x.view(2)
        a[0:1] *= 2
        if use == "written":
            b *= 3
            out = x
        elif use == "read":
            out = b * 3
        else:  # the base written directly: both views follow it
            x += 1
            out = a * b
        out.sum().backward()
        return foo.grad

    ours, theirs = _run_both(build, np.array([1.0, 2.0]))
    np.testing.assert_allclose(_np(ours), _np(theirs))


def test_inplace_writes_of_a_dual_into_plain_tensors():
    """``TestAutogradForwardMode.test_view_inplace_differentiable_views`` (the rest, with a dual of its own): a
    tensor written in place with a dual takes its tangent (zeros where nothing was written); a write through a
    detached alias gives the base none."""
    for lib, ad in ((ta, fwAD), (torch, torch.autograd.forward_ad)):
        with ad.dual_level():
            dual = ad.make_dual(lib.rand(2, dtype=lib.float64), lib.rand(2, dtype=lib.float64))
            baz = lib.rand(2, dtype=lib.float64)
            baz += dual
            assert _np(ad.unpack_dual(baz)[1]).tolist() == _np(ad.unpack_dual(dual)[1]).tolist()
            baz = lib.rand(2, dtype=lib.float64)
            baz[0] = dual[0]
            assert _np(ad.unpack_dual(baz)[1]).tolist() == [_np(ad.unpack_dual(dual)[1])[0], 0.0]
            baz = lib.rand(2, dtype=lib.float64)
            view = baz.detach()
            view += dual
            assert ad.unpack_dual(baz)[1] is None


def test_grad_cleanup():
    """``TestAutogradForwardMode.test_grad_cleanup``: a level's tangents are gone when it closes, and a new level
    starts without them."""
    for lib, ad in ((ta, fwAD), (torch, torch.autograd.forward_ad)):
        foo, bar, baz = lib.rand(2), lib.rand(2), lib.rand(2)
        with ad.dual_level():
            dual = ad.make_dual(foo, bar)
            assert ad.unpack_dual(foo)[1] is None and ad.unpack_dual(dual)[1] is bar
        assert ad.unpack_dual(dual)[1] is None
        with ad.dual_level():
            assert ad.unpack_dual(foo)[1] is None
            new_dual = ad.make_dual(foo, baz)
            dual_primal, dual_tangent = ad.unpack_dual(dual)
            new_dual_primal, new_dual_tangent = ad.unpack_dual(new_dual)
            assert _np(dual_primal).tolist() == _np(new_dual_primal).tolist()
            assert dual_tangent is None and _np(new_dual_tangent).tolist() == _np(baz).tolist()


# ----------------------------------------------------------------------------- TestAutogradFunctional: structure


def _same_struct(res, base):
    """PyTorch's ``_assert_same_struct``: tensors, or tuples of tensors, of the same sizes."""
    if isinstance(base, tuple):
        assert isinstance(res, tuple) and len(res) == len(base)
        for r, b in zip(res, base):
            _same_struct(r, b)
    else:
        assert isinstance(res, (ta.Tensor, torch.Tensor)) and tuple(res.shape) == tuple(base.shape)


def _interleaved_struct(res, base1, base2):
    """PyTorch's ``_assert_interleaved_struct``: ``res[i][j]`` has the shape ``base1[i].shape + base2[j].shape``,
    each level a tuple where its base is one."""
    if isinstance(base1, tuple):
        assert isinstance(res, tuple) and len(res) == len(base1)
        for r, b in zip(res, base1):
            _interleaved_struct(r, b, base2)
    elif isinstance(base2, tuple):
        assert isinstance(res, tuple) and len(res) == len(base2)
        for r, b in zip(res, base2):
            _interleaved_struct(r, base1, b)
    else:
        assert isinstance(res, (ta.Tensor, torch.Tensor))
        assert tuple(res.shape) == tuple(base1.shape) + tuple(base2.shape)


def _functional(lib):
    return lib.autograd.functional


def _narrow3(a):
    return a[0:3]  # (PyTorch's tests: a.narrow(0, 0, 3))


# ----------------------------------------------------------------------------- TestAutogradFunctional: errors


@pytest.mark.parametrize("name", ["vjp", "jvp"])
def test_vjp_jvp_err_check(name):
    """``TestAutogradFunctional.test_vjp_err_check`` and ``test_jvp_err_check``: inputs and outputs are tensors or
    tuples of them; ``v`` is omitted only for one element, holds one tensor per output (``vjp``) or input
    (``jvp``), each of its shape."""
    def foo(a):
        return 3 * _narrow3(a)

    def bar(a):
        return 3 * _narrow3(a), "bar"

    for lib in (ta, torch):
        F = _functional(lib)
        fn = getattr(F, name)
        inp = lib.rand(4, dtype=lib.float64)
        v = _ones(lib, 3) if name == "vjp" else lib.rand(4, dtype=lib.float64)
        with _raises(TypeError, f"The inputs given to {name} must be either a Tensor"):
            fn(foo, (inp, 2), v)
        with _raises(TypeError, f"The outputs of the user-provided function given to {name} must"):
            fn(bar, inp, v)
        with _raises(RuntimeError, "The vector v can only be None if the "
                                   + ("user-provided function returns" if name == "vjp" else "input to the user")):
            fn(foo, inp)
        with _raises(RuntimeError, "The given v should contain a single Tensor."):
            fn(foo, inp, (v, v))
        with _raises(RuntimeError, "v has invalid size: should be"):
            fn(foo, inp, v[:2])
        _same_struct(fn(foo, inp, v)[1], inp if name == "vjp" else foo(inp))


STRICT_INDEPENDENT = {  # PyTorch's message for an output independent of input 0, under strict=True
    "vjp": "The output of the user-provided function is independent of input 0",
    "jvp": "The output of the user-provided function is independent of input 0",
    "vhp": "The output of the user-provided function is independent of input 0",
    "hvp": "The output of the user-provided function is independent of input 0",
    "jacobian": "Output 0 of the user-provided function is independent of input 0.",
    "hessian": "jacobian of the user-provided function with respect to input 0",
}


def _check_strict(lib, name):
    F = _functional(lib)
    call = {"vjp": F.vjp, "jvp": F.jvp, "vhp": F.vhp, "hvp": F.hvp,
            "jacobian": lambda f, x, v, **kw: F.jacobian(f, x, **kw),
            "hessian": lambda f, x, v, **kw: F.hessian(f, x, **kw)}[name]
    scalar = name in ("vhp", "hvp", "hessian")
    product = name in ("vjp", "jvp", "vhp", "hvp")
    reduce = (lambda t: t.sum()) if scalar else (lambda t: t)
    foo = lambda a: reduce(a.detach())
    bar = lambda a: reduce(a.long().float().requires_grad_().clone())  # connected to nothing
    inp, v = lib.rand(4, dtype=lib.float64), lib.rand(4, dtype=lib.float64)
    with _raises(RuntimeError, "Output 0 of the user-provided function does not require gradients."):
        call(foo, inp, v, strict=True)
    res = call(foo, inp, v, strict=False)
    assert np.abs(_np(res[1] if product else res)).sum() == 0.0
    with _raises(RuntimeError, STRICT_INDEPENDENT[name]):
        call(bar, inp, v, strict=True)
    res = call(bar, inp, v, strict=False)
    assert np.abs(_np(res[1] if product else res)).sum() == 0.0
    if scalar:  # a linear function: its gradient does not depend on the input
        with _raises(RuntimeError, "jacobian of the user-provided function with respect to input 0 is"):
            call(lambda a: (3 * a).sum(), inp, v, strict=True)
    else:  # the Jacobian does not depend on the input
        inp.requires_grad_()
        with _raises(RuntimeError, "jacobian of the user-provided function is independent of input 0."):
            call(lambda a: a.clone(), inp, v, create_graph=True, strict=True)
        res = call(lambda a: a.clone(), inp, v, create_graph=True, strict=False)
        _close(_np(res[1] if product else res), _np(v) if product else np.eye(4))


@pytest.mark.parametrize("name", ["vjp", "jvp", "jacobian", "vhp", "hvp", "hessian"])
def test_err_check_strict(name):
    """``TestAutogradFunctional.test_{vjp,jvp,jacobian,vhp,hvp,hessian}_err_check_strict``: ``strict=True`` refuses
    an output that does not require grad, one independent of an input, and (``create_graph``) a Jacobian or a
    gradient independent of the input; without it those give zeros."""
    for lib in (ta, torch):
        _check_strict(lib, name)


def test_strict_and_vectorize_refused_together():
    """``TestAutogradFunctional.test_jacobian_err_check_strict_vectorize`` and
    ``test_hessian_err_check_strict_vectorize``."""
    for lib in (ta, torch):
        F = _functional(lib)
        inp = lib.rand(4, dtype=lib.float64)
        with _raises(RuntimeError, "not supported together"):
            F.jacobian(lambda x: x, inp, strict=True, vectorize=True)
        with _raises(RuntimeError, "not supported together"):
            F.hessian(lambda x: (x ** 3).sum(), inp, strict=True, vectorize=True)


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_and_hessian_err_check(vectorize):
    """``TestAutogradFunctional.test_jacobian_err_check`` (but its non-tensor output, below) and
    ``test_hessian_err_check``: what the inputs and outputs must be, and the shapes of the results (``[i][j]``:
    output ``i``, input ``j``)."""
    for lib in (ta, torch):
        F = _functional(lib)
        inp = lib.rand(4, dtype=lib.float64)
        with _raises(TypeError, "The inputs given to jacobian must be either a Tensor"):
            F.jacobian(lambda a: 3 * _narrow3(a), (inp, 2), vectorize=vectorize)
        _interleaved_struct(F.jacobian(lambda a: 3 * _narrow3(a), inp, vectorize=vectorize), _narrow3(inp), inp)
        two = (lib.rand(4, dtype=lib.float64), lib.rand(5, dtype=lib.float64))
        res = F.jacobian(lambda a, b: (b, 3 * _narrow3(a)), two, vectorize=vectorize)
        _interleaved_struct(res, (two[1], _narrow3(two[0])), two)

        with _raises(TypeError, "The inputs given to hessian must be either a Tensor"):
            F.hessian(lambda a: 3 * _narrow3(a).exp().sum(), (inp, 2), vectorize=vectorize)
        with _raises(TypeError, "The outputs of the user-provided function given to hessian must"):
            F.hessian(lambda a: (3 * _narrow3(a), "bar"), inp, vectorize=vectorize)
        with _raises(RuntimeError, "The Tensor returned by the function given to hessian should contain a single "
                                   "element"):
            F.hessian(lambda a: 3 * _narrow3(a), inp, vectorize=vectorize)
        with _raises(RuntimeError, "The function given to hessian should return a single Tensor"):
            F.hessian(lambda a: (3 * _narrow3(a), 3 * _narrow3(a)), inp, vectorize=vectorize)
        _interleaved_struct(F.hessian(lambda a: 3 * _narrow3(a).exp().sum(), inp, vectorize=vectorize), inp, inp)
        res = F.hessian(lambda a, b: (3 * _narrow3(b) * _narrow3(a)).sum(), two, vectorize=vectorize)
        _interleaved_struct(res, two, two)


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_err_check_outputs(vectorize):
    """``TestAutogradFunctional.test_jacobian_err_check``: an output that is not a tensor raises ``TypeError``."""
    for lib in (torch, ta):  # (torch first: it passes)
        with _raises(TypeError, "The outputs of the user-provided function given to jacobian must"):
            _functional(lib).jacobian(lambda a: (3 * _narrow3(a), "bar"), lib.rand(4, dtype=lib.float64),
                                      vectorize=vectorize)


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_hvp_err_check(name):
    """``TestAutogradFunctional.test_vhp_err_check`` and ``test_hvp_err_check``."""
    def foo(a):
        return 3 * _narrow3(a).exp().sum()

    for lib in (ta, torch):
        fn = getattr(_functional(lib), name)
        inp, v = lib.rand(4, dtype=lib.float64), lib.rand(4, dtype=lib.float64)
        with _raises(TypeError, f"The inputs given to {name} must be either a Tensor"):
            fn(foo, (inp, 2), v)
        with _raises(TypeError, f"The outputs of the user-provided function given to {name} must"):
            fn(lambda a: (3 * _narrow3(a), "bar"), inp, v)
        with _raises(RuntimeError, f"The Tensor returned by the function given to {name} should contain a single "
                                   "element"):
            fn(lambda a: 3 * _narrow3(a), inp, v)
        with _raises(RuntimeError, "v has invalid size:"):
            fn(foo, inp, lib.rand(5, dtype=lib.float64))
        with _raises(TypeError, f"The v given to {name} must be either a Tensor or a tuple of Tensors"):
            fn(foo, inp, (v, 2))
        _same_struct(fn(foo, inp, v)[1], inp)
        two = (lib.rand(4, dtype=lib.float64), lib.rand(5, dtype=lib.float64))
        v2 = (lib.rand(4, dtype=lib.float64), lib.rand(5, dtype=lib.float64))
        _same_struct(fn(lambda a, b: (3 * _narrow3(b) * _narrow3(a)).sum(), two, v2)[1], two)


# ----------------------------------------------------------------------------- TestAutogradFunctional: results


NO_GRAD = {  # PyTorch's test: (the function, v's shape or None, whether the create_graph call's inputs require grad)
    "test_vjp_no_grad": ("vjp", lambda x: x.sum(dim=1), (4,), True),
    "test_jvp_no_grad": ("jvp", lambda x: x.sum(dim=1), (4, 4), True),
    "test_vhp_no_grad": ("vhp", lambda x: x.exp().sum(), (4, 4), False),
    "test_hvp_no_grad": ("hvp", lambda x: x.exp().sum(), (4, 4), False),
    "test_jacobian_no_grad": ("jacobian", lambda x: x.exp().sum(dim=1), None, False),
    "test_hessian_no_grad": ("hessian", lambda x: x.pow(3).sum(), None, False),
}


@pytest.mark.parametrize("case", list(NO_GRAD))
def test_functional_no_grad(case):
    """``TestAutogradFunctional.test_{vjp,jvp,vhp,hvp,jacobian,hessian}_no_grad``: under ``no_grad`` the results
    carry no graph, unless ``create_graph=True``; and they are not zeros."""
    name, f, v_shape, requires_grad = NO_GRAD[case]
    (x0,) = _arrays((4, 4) if v_shape is not None or name == "jacobian" else (2, 2), seed=13, low=0.0)

    def build(lib, inputs):
        fn = getattr(_functional(lib), name)
        args = (f, inputs) + ((_ones(lib, *v_shape),) if v_shape else ())
        with lib.no_grad():
            res = fn(*args)
        parts = list(res) if v_shape else ([res] if name == "jacobian" else [res[0][0], res[0][1], res[1][0]])
        assert all(p.grad_fn is None for p in parts)
        if requires_grad:
            inputs.requires_grad_()
            args[2].requires_grad_()
        with lib.no_grad():
            res_graph = fn(*args, create_graph=True)
        parts = list(res_graph) if v_shape else ([res_graph] if name == "jacobian" else [res_graph[0][0]])
        assert all(p.grad_fn is not None for p in parts)
        assert np.abs(_np(res_graph[1] if v_shape else res_graph)).sum() > 0
        return res[1] if v_shape else res

    ours, theirs = _run_both(build, x0)
    _close(ours, theirs)


@pytest.mark.parametrize("name", ["vjp", "jvp"])
def test_vjp_jvp_output(name):
    """``TestAutogradFunctional.test_vjp_output`` and ``test_jvp_output``: results shaped as the inputs (``vjp``) or
    outputs (``jvp``), with no graph, for one input and one output, two inputs, and two inputs and two outputs;
    and equal to torch's."""
    def build(lib, x, a, b, c, d):
        fn = getattr(_functional(lib), name)
        reducer_v = _ones(lib, 4) if name == "vjp" else _ones(lib, 4, 4)
        single_v = _ones(lib, 2) if name == "vjp" else (_ones(lib, 2), _ones(lib, 2))
        tuple_v = (lib.tensor([1.0, 0.0], dtype=lib.float64), lib.tensor([1.0, 0.0], dtype=lib.float64))
        results = []
        for f, inputs, v in [(lambda x: x.sum(dim=1), x, reducer_v), (lambda x, y: 2 * x + 3 * y, (a, b), single_v),
                             (lambda x, y: (2 * x + 3 * y, x + y), (c, d), tuple_v)]:
            out, val = fn(f, inputs, v)
            _same_struct(val, inputs if name == "vjp" else out)
            outs = out if isinstance(out, tuple) else (out,)
            vals = val if isinstance(val, tuple) else (val,)
            assert all(t.grad_fn is None for t in outs + vals)
            results += [out, val]
        return results

    ours, theirs = _run_both(build, *_arrays((4, 4), 2, 2, 2, 2, seed=14, low=0.0))
    _close(ours, theirs)


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_hvp_output(name):
    """``TestAutogradFunctional.test_vhp_output`` and ``test_hvp_output``: results shaped as the inputs, with no
    graph; and equal to torch's."""
    def build(lib, x, a, b):
        fn = getattr(_functional(lib), name)
        out, res = fn(lambda a: 3 * _narrow3(a).exp().sum(), x, _ones(lib, 4, 4))
        _same_struct(res, x)
        assert out.grad_fn is None and res.grad_fn is None
        inputs = (a, b)
        out2, val = fn(lambda a, b: (a + 3 * _narrow3(b)).exp().sum(), inputs, (_ones(lib, 3), _ones(lib, 4)))
        _same_struct(val, inputs)
        assert out2.grad_fn is None and val[0].grad_fn is None and val[1].grad_fn is None
        return out, res, out2, val

    ours, theirs = _run_both(build, *_arrays((4, 4), 3, 4, seed=15, low=0.0))
    _close(ours, theirs)


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_and_hessian_output(vectorize):
    """``TestAutogradFunctional.test_jacobian_output`` and ``test_hessian_output``: interleaved shapes, no graph; the
    Jacobian of the identity is the identity; and equal to torch's."""
    def build(lib, x, ident, a, b, h, c, d):
        F = _functional(lib)
        res = F.jacobian(lambda x: x.exp().sum(dim=1), x, vectorize=vectorize)
        _interleaved_struct(res, x[:, 0], x)
        identity = F.jacobian(lambda x: x.clone(), ident, vectorize=vectorize)
        _interleaved_struct(identity, ident, ident)
        two = F.jacobian(lambda x, y: (x + y.exp()).sum(dim=1), (a, b), vectorize=vectorize)
        _interleaved_struct(two, a[:, 0], (a, b))
        hes = F.hessian(lambda x: x.pow(3).sum(), h, vectorize=vectorize)
        _interleaved_struct(hes, h, h)
        hes_two = F.hessian(lambda x, y: (x + y).pow(3).sum(), (c, d), vectorize=vectorize)
        _interleaved_struct(hes_two, (c, d), (c, d))
        results = [res, identity, two, hes, hes_two]
        assert all(t.grad_fn is None for t in [res, identity, *two, hes, *hes_two[0], *hes_two[1]])
        return results

    arrays = _arrays((4, 4), 4, (4, 4), (4, 4), (2, 2), (2, 2), (2, 2), seed=16, low=0.0)
    ours, theirs = _run_both(build, *arrays)
    _close(ours, theirs)
    _close(ours[1], np.eye(4))


@pytest.mark.parametrize("name", ["vjp", "jvp", "vhp", "hvp", "jacobian", "hessian"])
def test_scalar(name):
    """``TestAutogradFunctional.test_{vjp,jvp,vhp,hvp,jacobian,hessian}_scalar``: 0-d outputs and inputs (``v``
    omitted where it may be), an expander from 0-d to ``(4,)`` and a ``(1, 1, 1)`` output; equal to torch's."""
    def build(lib, x, s, v_s):
        F = _functional(lib)
        fn = getattr(F, name)
        results = []
        if name in ("vjp", "jvp"):
            expander = lambda x: x.unsqueeze(0).repeat(4)
            res = fn(lambda x: x.sum(), x, _ones(lib, ()) if name == "vjp" else _ones(lib, 4, 4))
            _same_struct(res[0], lib.zeros(()))
            _same_struct(res[1], x if name == "vjp" else res[0])
            results += list(res)
            if name == "vjp":
                results += list(fn(lambda x: x.sum(), x))
            res = fn(expander, s, _ones(lib, 4) if name == "vjp" else _ones(lib, ()))
            _same_struct(res[0], lib.zeros(4))
            _same_struct(res[1], s if name == "vjp" else res[0])
            results += list(res)
            if name == "jvp":
                results += list(fn(expander, s))
        elif name in ("vhp", "hvp"):
            reducer = (lambda x: x.sum()) if name == "vhp" else (lambda x: x.exp().sum())
            for inputs, v in ((x, _ones(lib, 4, 4)), (s, v_s)):
                res = fn(reducer, inputs, v)
                _same_struct(res[1], inputs)
                results += list(res)
            results += list(fn(reducer, s))
            res = fn(lambda x: reducer(x).view(1, 1, 1), x, x.clone())
            _same_struct(res[1], x)
            results += list(res)
        elif name == "jacobian":
            for vectorize in (False, True):
                res = fn(lambda x: x.sum(), x, vectorize=vectorize)
                _same_struct(res, x)
                res_e = fn(lambda x: x.unsqueeze(0).repeat(4), s, vectorize=vectorize)
                _same_struct(res_e, lib.zeros(4))
                results += [res, res_e]
        else:
            for vectorize in (False, True):
                res = fn(lambda x: x.sum(), x, vectorize=vectorize)
                _interleaved_struct(res, x, x)
                res_s = fn(lambda x: x.sum(), s, vectorize=vectorize)
                _same_struct(res_s, s)
                res_b = fn(lambda x: x.sum().view(1, 1, 1), x, vectorize=vectorize)
                _interleaved_struct(res_b, x, x)
                results += [res, res_s, res_b]
        return results

    ours, theirs = _run_both(build, *_arrays((4, 4), (), (), seed=17, low=0.0))
    _close(ours, theirs)


# ----------------------------------------------------------------------------- TestAutogradFunctional: create_graph


def _adder_product(x, y):
    return 2 * x + 3 * y, x * y


@pytest.mark.parametrize("name", ["vjp", "jvp"])
def test_vjp_jvp_create_graph(name):
    """``TestAutogradFunctional.test_vjp_create_graph`` and ``test_jvp_create_graph``: with ``create_graph`` the
    results have a graph, and their first and second derivatives pass ``gradcheck`` and ``gradgradcheck``
    (``tinyattn.testing``'s), also when the call is inside a larger function."""
    fn = getattr(ta.autograd.functional, name)
    reducer = lambda x: x.sum(dim=1)
    inputs = ta.tensor(_arrays((2, 2), seed=18, low=0.0)[0], requires_grad=True)
    v = ta.ones(2 if name == "vjp" else (2, 2), dtype=ta.float64, requires_grad=True)
    res = fn(reducer, inputs, v, create_graph=True)
    _same_struct(res[1], inputs if name == "vjp" else res[0])
    assert res[0].grad_fn is not None and res[1].grad_fn is not None
    # (PyTorch's vjp case differentiates a function of `inputs`, not of its own argument: ported as it is)
    reduced = (lambda inp, v: fn(reducer, inputs, v, create_graph=True)) if name == "vjp" else \
        (lambda inp, v: fn(reducer, inp, v, create_graph=True))
    assert gradcheck(reduced, [inputs, v]) and gradgradcheck(reduced, [inputs, v])

    inputs = tuple(ta.tensor(a, requires_grad=True) for a in _arrays(2, 2, seed=19, low=0.0))
    v = tuple(ta.tensor([1.0, 0.0], dtype=ta.float64, requires_grad=True) for _ in range(2))
    adder = lambda *args: fn(_adder_product, args[:2], args[2:], create_graph=True)[1]
    assert gradcheck(adder, inputs + v) and gradgradcheck(adder, inputs + v)

    def foo(*args):
        x, y = args[:2]
        v = args[2:]
        x = x.cos()
        val, grad = fn(_adder_product, (x, y), v, create_graph=True)
        return val[0].exp() + val[1].exp() + grad[0].exp() + grad[1].exp() + x.exp() + y.exp()

    assert gradcheck(foo, inputs + v) and gradgradcheck(foo, inputs + v)


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_hvp_create_graph(name):
    """``TestAutogradFunctional.test_vhp_create_graph`` and ``test_hvp_create_graph``."""
    fn = getattr(ta.autograd.functional, name)
    foo = lambda a: 3 * _narrow3(a).exp().sum()
    bar = lambda a, b: (a + 3 * _narrow3(b)).exp().sum()
    inputs = ta.tensor(_arrays((4, 4), seed=20, low=0.0)[0], requires_grad=True)
    v = ta.ones(4, 4, dtype=ta.float64, requires_grad=True)
    res = fn(foo, inputs, v, create_graph=True)
    _same_struct(res[1], inputs)
    assert res[0].grad_fn is not None and res[1].grad_fn is not None
    of_foo = lambda inp, v: fn(foo, inp, v, create_graph=True)
    assert gradcheck(of_foo, [inputs, v]) and gradgradcheck(of_foo, [inputs, v])

    inputs = tuple(ta.tensor(a, requires_grad=True) for a in _arrays(3, 4, seed=21, low=0.0))
    v = (ta.ones(3, dtype=ta.float64, requires_grad=True), ta.ones(4, dtype=ta.float64, requires_grad=True))
    out, val = fn(bar, inputs, v, create_graph=True)
    _same_struct(val, inputs)
    assert out.grad_fn is not None and val[0].grad_fn is not None and val[1].grad_fn is not None
    of_bar = lambda *args: fn(bar, args[:2], args[2:], create_graph=True)[1]
    assert gradcheck(of_bar, inputs + v) and gradgradcheck(of_bar, inputs + v)

    def outer(*args):
        x, y = args[:2]
        v = args[2:]
        x = x.cos()
        val, grad = fn(bar, (x, y), v, create_graph=True)
        return val.cos() + grad[0].cos().sum() + grad[1].cos() + x.cos().sum() + y.cos()

    assert gradcheck(outer, inputs + v) and gradgradcheck(outer, inputs + v)


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_create_graph(vectorize):
    """``TestAutogradFunctional.test_jacobian_create_graph``."""
    jacobian = ta.autograd.functional.jacobian
    exp_reducer = lambda x: x.exp().sum(dim=1)
    add_exp_reducer = lambda x, y: (x + y).exp().sum(dim=1)
    inputs = ta.tensor(_arrays((4, 4), seed=22, low=0.0)[0], requires_grad=True)
    res = jacobian(exp_reducer, inputs, create_graph=True, vectorize=vectorize)
    _interleaved_struct(res, exp_reducer(inputs), inputs)
    assert res.grad_fn is not None
    of_one = lambda inp: jacobian(exp_reducer, inp, create_graph=True, vectorize=vectorize)
    assert gradcheck(of_one, [inputs]) and gradgradcheck(of_one, [inputs])

    inputs = tuple(ta.tensor(a, requires_grad=True) for a in _arrays((4, 4), (4, 4), seed=23, low=0.0))
    res = jacobian(add_exp_reducer, inputs, create_graph=True, vectorize=vectorize)
    _interleaved_struct(res, add_exp_reducer(*inputs), inputs)
    assert res[0].grad_fn is not None and res[1].grad_fn is not None
    of_two = lambda *inp: jacobian(add_exp_reducer, inp, create_graph=True, vectorize=vectorize)
    assert gradcheck(of_two, inputs) and gradgradcheck(of_two, inputs)

    def foo(x, y):
        x = x.cos()
        val, jac = jacobian(add_exp_reducer, (x, y), create_graph=True, vectorize=vectorize)
        res = val[0].exp().sum() + val[1].exp().sum() + jac[0].exp().sum()
        return res + jac[1].exp().sum() + x.exp().sum() + y.exp().sum()

    assert gradcheck(foo, inputs) and gradgradcheck(foo, inputs)


@pytest.mark.parametrize("vectorize", [False, True])
def test_hessian_create_graph(vectorize):
    """``TestAutogradFunctional.test_hessian_create_graph``."""
    hessian = ta.autograd.functional.hessian
    pow_reducer = lambda x: x.pow(3).sum()
    add_pow_reducer = lambda x, y: (x + y).pow(3).sum()
    inputs = ta.tensor(_arrays((2, 2), seed=24, low=0.0)[0], requires_grad=True)
    res = hessian(pow_reducer, inputs, create_graph=True, vectorize=vectorize)
    _interleaved_struct(res, inputs, inputs)
    assert res.grad_fn is not None
    of_one = lambda inp: hessian(pow_reducer, inp, create_graph=True, vectorize=vectorize)
    assert gradcheck(of_one, [inputs]) and gradgradcheck(of_one, [inputs])

    inputs = tuple(ta.tensor(a, requires_grad=True) for a in _arrays((2, 2), (2, 2), seed=25, low=0.0))
    res = hessian(add_pow_reducer, inputs, create_graph=True, vectorize=vectorize)
    _interleaved_struct(res, inputs, inputs)
    assert all(r.grad_fn is not None for row in res for r in row)

    def flatten(inp):
        return tuple(el_lvl2 for el_lvl1 in inp for el_lvl2 in el_lvl1)

    of_two = lambda *inp: flatten(hessian(add_pow_reducer, inp, create_graph=True, vectorize=vectorize))
    assert gradcheck(of_two, inputs) and gradgradcheck(of_two, inputs)

    def foo(x, y):
        x = x.cos()
        val, hess = hessian(add_pow_reducer, (x, y), create_graph=True, vectorize=vectorize)
        res = val[0].cos().sum() + val[1].cos().sum() + hess[0].cos().sum()
        return res + hess[1].cos().sum() + x.cos().sum() + y.cos().sum()

    assert gradcheck(foo, inputs) and gradgradcheck(foo, inputs)


# ----------------------------------------------------------------------------- TestAutogradFunctional: vectorize


JACOBIAN_CASES = {  # test_jacobian_vectorize_correctness_*: (f in the library lib, input shapes, forward mode too)
    "simple": (lambda lib: lambda x: 3 * x ** 2, [(2, 3, 5)], True),
    "multi_input": (lambda lib: lambda x, y: (x.cos() * x) @ y.sin(), [(2, 3), (3, 5)], True),
    "multi_input_multi_output": (lambda lib: lambda x, y: ((x * x) @ y, x @ (x.sum(1) * y), y.sum()),
                                 [(5, 3), (3, 5)], True),
    "unrelated_outputs": (lambda lib: lambda x, y: (x, y, x, y), [2, 3], True),
    "zero_dim_output": (lambda lib: lambda x, y: (x.sum(), y.sum(), x * y), [3, 3], True),
    "zero_dim_input": (lambda lib: lambda x: lib.stack([x, x, x]), [()], True),
    "zero_dim_mixed": (lambda lib: lambda x, y: (y.sum(), x * y), [(), 1], True),
    "different_dtype": (lambda lib: lambda x, y: ((x * y).float(), (x * y).double()), [3, 3], False),
}


@pytest.mark.parametrize("case", list(JACOBIAN_CASES))
def test_jacobian_vectorize_correctness(case):
    """``TestAutogradFunctional.test_jacobian_vectorize_correctness_*``: ``vectorize=True`` (and the forward-mode
    strategy, but for outputs of another dtype than the inputs) gives the Jacobian one backward pass per output
    element gives; and torch's."""
    build, shapes, forward = JACOBIAN_CASES[case]
    arrays = _arrays(*shapes, seed=26)
    inputs = tuple(ta.tensor(a) for a in arrays)
    inputs = inputs[0] if len(inputs) == 1 else inputs
    jacobian = ta.autograd.functional.jacobian
    expected = jacobian(build(ta), inputs, vectorize=False)
    _close(jacobian(build(ta), inputs, vectorize=True), expected, rtol=1e-6)
    if forward:
        _close(jacobian(build(ta), inputs, strategy="forward-mode", vectorize=True), expected, rtol=1e-6)
    theirs_inputs = tuple(torch.tensor(a) for a in arrays)
    theirs_inputs = theirs_inputs[0] if len(theirs_inputs) == 1 else theirs_inputs
    _close(expected, torch.autograd.functional.jacobian(build(torch), theirs_inputs), rtol=1e-6)


HESSIAN_CASES = {  # test_hessian_vectorize_correctness_*: (f in the library lib, input shapes)
    "simple": (lambda lib: lambda x: (3 * x ** 2).sum(), [(2, 3, 5)]),
    "multi_input": (lambda lib: lambda x, y, z: ((x.relu() * x) @ y.sin() @ z).sum(), [(2, 3), (3, 5), (5, 5)]),
    "unrelated_outputs_one": (lambda lib: lambda x, y: (x ** 2).sum(), [2, 3]),
    "unrelated_outputs_all": (lambda lib: lambda x, y: lib.ones(()), [2, 3]),
}


@pytest.mark.parametrize("case", list(HESSIAN_CASES))
def test_hessian_vectorize_correctness(case):
    """``TestAutogradFunctional.test_hessian_vectorize_correctness_*``: ``vectorize=True``, and forward over reverse
    (``outer_jacobian_strategy="forward-mode"``), give the Hessian of the plain loop; and torch's."""
    build, shapes = HESSIAN_CASES[case]
    arrays = _arrays(*shapes, seed=27)
    inputs = tuple(ta.tensor(a) for a in arrays)
    inputs = inputs[0] if len(inputs) == 1 else inputs
    hessian = ta.autograd.functional.hessian
    expected = hessian(build(ta), inputs, vectorize=False)
    _close(hessian(build(ta), inputs, vectorize=True), expected)
    _close(hessian(build(ta), inputs, outer_jacobian_strategy="forward-mode", vectorize=True), expected)
    theirs_inputs = tuple(torch.tensor(a) for a in arrays)
    theirs_inputs = theirs_inputs[0] if len(theirs_inputs) == 1 else theirs_inputs
    _close(expected, torch.autograd.functional.hessian(build(torch), theirs_inputs))


def test_jacobian_match_vjp_jvp_and_hessian_match_vhp_hvp():
    """``TestAutogradFunctional.test_jacobian_match_vjp_jvp`` and ``test_hessian_match_vhp_hvp``: ``J v``, ``vᵀ J``,
    ``H v`` and ``vᵀ H`` by the products equal the full matrices times ``v``."""
    def build(lib, x, v):
        F = _functional(lib)
        foo = lambda x: x ** 3 + x.sum()
        bar = lambda a: 3 * _narrow3(a).exp().sum()
        jac, hes = F.jacobian(foo, x), F.hessian(bar, x)
        return (jac, F.jvp(foo, x, v)[1], F.vjp(foo, x, v)[1], hes, F.hvp(bar, x, v)[1], F.vhp(bar, x, v)[1])

    x, v = _arrays(4, 4, seed=28, low=0.0)
    ours, theirs = _run_both(build, x, v)
    _close(ours, theirs)
    jac, hes = _np(ours[0]), _np(ours[3])
    _close(ours[1:3], (jac @ v, v @ jac))
    _close(ours[4:], (hes @ v, v @ hes))
