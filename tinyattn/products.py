"""Floor 3, by family: products: addmm, baddbmm, outer, dot, mv, tensordot, einsum, kron and the matrix power.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's. Every contraction here is one
``matmul`` on operands permuted and reshaped to ``(batch, rows, inner)`` and ``(batch, inner, columns)``.

>>> import tinyattn as ta
>>> a = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> ta.addmm(ta.ones(2), a, a, beta=0.5).tolist()
[[7.5, 10.5], [15.5, 22.5]]
"""

import builtins
import itertools

import numpy as np

from . import backend
from .creation import ones_like
from .engine import Tensor
from .ops import _lift, _normalize_dims, getitem, matmul, mul, permute, reshape, stack, sum
from .ops_extra import bmm

__all__ = ["addmm", "addmv", "addbmm", "baddbmm", "addr", "dot", "vdot", "mm", "mv", "outer", "ger", "inner",
           "tensordot", "einsum", "kron", "cross", "chain_matmul"]


# ----------------------------------------------------------------------------- checks


def _expect_ndim(name, **tensors):
    """Each tensor of ``tensors`` (name → (tensor, ndim)) has its ndim, else torch's RuntimeError."""
    for label, (t, ndim) in tensors.items():
        if t.ndim != ndim:
            raise RuntimeError(f"{name}: expected {label} to be a {ndim}-D tensor, got {t.ndim}-D of shape "
                               f"{tuple(t.shape)}")


def _scaled_sum(input, product, beta, alpha):
    """``beta·input + alpha·product``; with ``beta == 0`` ``input`` is ignored (its NaN and inf too), as in torch."""
    term = product if alpha == 1 else mul(product, alpha)
    if beta == 0:
        np.broadcast_shapes(input.shape, product.shape)  # (still a shape error where torch gives one)
        return term
    return (input if beta == 1 else mul(input, beta)) + term


# ----------------------------------------------------------------------------- matrix and vector products


def mm(input, mat2):
    """The product of two matrices, ``(n, k) @ (k, m)`` → ``(n, m)``; ``matmul`` for 2-D operands only.

    >>> import tinyattn as ta
    >>> ta.mm(ta.ones(2, 3), ta.ones(3, 4)).shape
    (2, 4)
    """
    _expect_ndim("mm", input=(input, 2), mat2=(mat2, 2))
    return matmul(input, mat2)


def mv(input, vec):
    """The matrix-vector product, ``(n, m) @ (m,)`` → ``(n,)``.

    >>> import tinyattn as ta
    >>> ta.mv(ta.tensor([[1.0, 2.0], [3.0, 4.0]]), ta.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    _expect_ndim("mv", input=(input, 2), vec=(vec, 1))
    return matmul(input, vec)


def dot(input, other):
    """The inner product of two 1-D tensors of the same size: ``Σᵢ input[i]·other[i]`` (a 0-d tensor).

    >>> import tinyattn as ta
    >>> ta.dot(ta.tensor([1.0, 2.0]), ta.tensor([3.0, 4.0]))
    tensor(11.)
    """
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"dot: 1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape != other.shape:
        raise RuntimeError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                           f"[{other.shape[0]}] to have the same number of elements, but got {input.shape[0]} and "
                           f"{other.shape[0]} elements respectively")
    return matmul(input, other)


def vdot(input, other):
    """``Σᵢ conj(input[i])·other[i]``: ``dot`` for the real tensors tinyattn holds.

    >>> import tinyattn as ta
    >>> ta.vdot(ta.tensor([1.0, 2.0]), ta.tensor([3.0, 4.0]))
    tensor(11.)
    """
    return dot(input, other)


def outer(input, vec2):
    """The outer product of two vectors: ``out[i, j] = input[i]·vec2[j]``, shape ``(n, m)``.

    >>> import tinyattn as ta
    >>> ta.outer(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 10.0, 100.0]))
    tensor([[  1.,  10., 100.],
            [  2.,  20., 200.]])
    """
    _expect_ndim("outer", input=(input, 1), vec2=(vec2, 1))
    return mul(reshape(input, -1, 1), reshape(_lift(vec2, input), 1, -1))  # (n, 1)·(1, m) → (n, m)


def ger(input, vec2):
    """``outer`` under its older BLAS name.

    >>> import tinyattn as ta
    >>> ta.ger(ta.tensor([1.0, 2.0]), ta.tensor([3.0])).tolist()
    [[3.0], [6.0]]
    """
    return outer(input, vec2)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta·input + alpha·(mat1 @ mat2)``: ``input`` broadcasts to ``(n, m)``; ``beta = 0`` ignores it.

    >>> import tinyattn as ta
    >>> ta.addmm(ta.tensor([1.0, 2.0]), ta.ones(2, 3), ta.ones(3, 2), alpha=2)
    tensor([[7., 8.],
            [7., 8.]])
    """
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta·input + alpha·(mat @ vec)``: ``input`` broadcasts to ``(n,)``.

    >>> import tinyattn as ta
    >>> ta.addmv(ta.tensor(1.0), ta.ones(2, 3), ta.ones(3))
    tensor([4., 4.])
    """
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta·input + alpha·outer(vec1, vec2)``: ``input`` broadcasts to ``(n, m)``.

    >>> import tinyattn as ta
    >>> ta.addr(ta.zeros(2, 2), ta.tensor([1.0, 2.0]), ta.tensor([3.0, 4.0]))
    tensor([[3., 4.],
            [6., 8.]])
    """
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta·input + alpha·(batch1 @ batch2)``, batch by batch: ``(B, n, k) @ (B, k, m)`` → ``(B, n, m)``.

    >>> import tinyattn as ta
    >>> ta.baddbmm(ta.zeros(1), ta.ones(2, 3, 4), ta.ones(2, 4, 5), alpha=0.5).shape
    (2, 3, 5)
    """
    return _scaled_sum(input, _bmm(batch1, batch2, "baddbmm"), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta·input + alpha·Σ_b batch1[b] @ batch2[b]``: the batch's products summed to one ``(n, m)``.

    >>> import tinyattn as ta
    >>> ta.addbmm(ta.zeros(3, 5), ta.ones(2, 3, 4), ta.ones(2, 4, 5))[0, 0]
    tensor(8.)
    """
    if batch1.dtype == np.float16:  # torch accumulates the batch's products of half floats in float32
        product = sum(_bmm(batch1.to(np.float32), _lift(batch2, batch1).to(np.float32), "addbmm"), dim=0)
        return _scaled_sum(input, product.to(np.float16), beta, alpha)
    return _scaled_sum(input, sum(_bmm(batch1, batch2, "addbmm"), dim=0), beta, alpha)  # (n, m)


def _bmm(batch1, batch2, name):
    _expect_ndim(name, batch1=(batch1, 3), batch2=(batch2, 3))
    return bmm(batch1, batch2)  # (B, n, m)


def chain_matmul(*matrices):
    """``matrices[0] @ matrices[1] @ …``, each 2-D (torch's older name of ``linalg.multi_dot``).

    >>> import tinyattn as ta
    >>> ta.chain_matmul(ta.ones(2, 3), ta.ones(3, 4), ta.ones(4, 1)).tolist()
    [[12.0], [12.0]]
    """
    for i, m in enumerate(matrices):
        _expect_ndim("chain_matmul", **{f"matrices[{i}]": (m, 2)})
    return multi_dot(matrices)


def multi_dot(tensors):
    """``tensors[0] @ tensors[1] @ …``: the first may be a row vector ``(k,)`` and the last a column ``(k,)``
    (their dimension dropped from the result); the others are 2-D.

    >>> import tinyattn as ta
    >>> ta.linalg.multi_dot([ta.ones(3), ta.ones(3, 4), ta.ones(4)])
    tensor(12.)
    """
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            raise RuntimeError(f"multi_dot(): tensor {i} must be {' or '.join(f'{n}D' for n in allowed)} "
                               f"but got {t.ndim}D")
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def inner(input, other):
    """``Σ_k input[…, k]·other[…, k]`` over the last dimensions: shape ``input.shape[:-1] + other.shape[:-1]``
    (a 0-d operand multiplies instead).

    >>> import tinyattn as ta
    >>> ta.inner(ta.ones(2, 3), ta.ones(4, 3)).shape
    (2, 4)
    """
    other = _lift(other, input)
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    return tensordot(input, other, dims=([input.ndim - 1], [other.ndim - 1]))


def tensordot(a, b, dims=2):
    """``Σ`` over paired dimensions: ``dims`` an int ``d`` (``a``'s last ``d`` with ``b``'s first ``d``) or a pair
    of lists ``([a dims], [b dims])``; the result has ``a``'s other dimensions, then ``b``'s.

    >>> import tinyattn as ta
    >>> ta.tensordot(ta.ones(2, 3, 4), ta.ones(3, 4, 5)).shape
    (2, 5)
    >>> ta.tensordot(ta.ones(2, 3), ta.ones(3, 2), dims=([0, 1], [1, 0]))
    tensor(6.)
    """
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        a_dims, b_dims = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        a_dims, b_dims = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(a_dims) != len(b_dims):
        raise RuntimeError(f"both dimension lists should have same length, got {a_dims} and {b_dims}")
    a_dims = [d % builtins.max(a.ndim, 1) for d in a_dims]
    b_dims = [d % builtins.max(b.ndim, 1) for d in b_dims]
    a_shape, b_shape = list(a.shape), list(b.shape)
    for i, j in zip(a_dims, b_dims):  # a contracted size of 1 broadcasts against the other's, as in torch
        if a.shape[i] != b.shape[j] and 1 not in (a.shape[i], b.shape[j]):
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                               f"and second has size {b.shape[j]} in dim {j}")
        a_shape[i] = b_shape[j] = builtins.max(a.shape[i], b.shape[j])
    a, b = a.expand(*a_shape), b.expand(*b_shape)
    a_free = [d for d in range(a.ndim) if d not in a_dims]
    b_free = [d for d in range(b.ndim) if d not in b_dims]
    inner_size = int(np.prod([a.shape[d] for d in a_dims]))
    a_matrix = reshape(permute(a, *a_free, *a_dims), -1, inner_size)  # (rows, inner)
    b_matrix = reshape(permute(b, *b_dims, *b_free), inner_size, -1)  # (inner, columns)
    out = matmul(a_matrix, b_matrix)  # (rows, columns)
    return reshape(out, *[a.shape[d] for d in a_free], *[b.shape[d] for d in b_free])


def kron(input, other):
    """The Kronecker product: ``out[i·n + k, j·m + l] = input[i, j]·other[k, l]`` (any rank; the shorter
    shape padded with leading ones).

    >>> import tinyattn as ta
    >>> ta.kron(ta.tensor([[1.0, 2.0]]), ta.tensor([[1.0], [10.0]]))
    tensor([[ 1.,  2.],
            [10., 20.]])
    """
    other = _lift(other, input)
    ndim = builtins.max(input.ndim, other.ndim)
    a_shape = (1,) * (ndim - input.ndim) + tuple(input.shape)
    b_shape = (1,) * (ndim - other.ndim) + tuple(other.shape)
    a = reshape(input, *itertools.chain.from_iterable((n, 1) for n in a_shape))  # (a0, 1, a1, 1, …)
    b = reshape(other, *itertools.chain.from_iterable((1, n) for n in b_shape))  # (1, b0, 1, b1, …)
    return reshape(mul(a, b), *(m * n for m, n in zip(a_shape, b_shape)))  # (a0·b0, a1·b1, …)


def cross(input, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (the first dimension of size 3 when ``None``, as torch's
    deprecated default): ``(a₁b₂ − a₂b₁, a₂b₀ − a₀b₂, a₀b₁ − a₁b₀)``; the operands broadcast.

    >>> import tinyattn as ta
    >>> ta.cross(ta.tensor([1.0, 0.0, 0.0]), ta.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    other = _lift(other, input)
    shape = np.broadcast_shapes(input.shape, other.shape)
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input of shape {tuple(shape)}")
    return _cross(input, other, dim, shape, "cross")


def linalg_cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim``: ``(a₁b₂ − a₂b₁, a₂b₀ − a₀b₂, a₀b₁ − a₁b₀)``; the operands
    broadcast.

    >>> import tinyattn as ta
    >>> ta.linalg.cross(ta.tensor([[0.0, 1.0, 0.0]]), ta.tensor([[0.0, 0.0, 1.0]]))
    tensor([[1., 0., 0.]])
    """
    other = _lift(other, input)
    return _cross(input, other, dim, np.broadcast_shapes(input.shape, other.shape), "linalg.cross")


def _cross(input, other, dim, shape, name):
    dim = _normalize_dims(dim, len(shape), name)[0]
    if input.ndim != other.ndim:
        raise RuntimeError(f"{name}: inputs must have the same number of dimensions, got {input.ndim} and "
                           f"{other.ndim}")
    if shape[dim] != 3 or input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"{name}: inputs dimension {dim} must have length 3, got {input.shape[dim]} and "
                           f"{other.shape[dim]}")
    lead = (slice(None),) * dim
    a = [getitem(input, lead + (i,)) for i in range(3)]
    b = [getitem(other, lead + (i,)) for i in range(3)]
    parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    return stack(parts, dim)


def vecdot(x, y, *, dim=-1):
    """``Σ x·y`` along ``dim`` (the operands broadcast; real tensors, so no conjugate).

    >>> import tinyattn as ta
    >>> ta.linalg.vecdot(ta.ones(2, 3), ta.ones(3))
    tensor([3., 3.])
    """
    product = mul(x, _lift(y, x))
    return sum(product, dim=_normalize_dims(dim, product.ndim, "linalg.vecdot")[0])


def matrix_power(A, n):
    """``A @ A @ … @ A`` (``n`` factors) for square matrices ``(…, m, m)``, by repeated squaring; ``n = 0`` gives the
    identity. Negative ``n`` needs the inverse, which tinyattn does not provide (solvers are out of scope).

    >>> import tinyattn as ta
    >>> ta.linalg.matrix_power(ta.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    tensor([[1., 3.],
            [0., 1.]])
    """
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{tuple(A.shape[-2:])} matrices")
    if n < 0:
        raise NotImplementedError(f"linalg.matrix_power: a negative exponent ({n}) needs the matrix inverse, which "
                                  "tinyattn does not provide (decompositions and solvers are out of scope)")
    xp = backend.namespace(A._data)
    eye = _lift(xp.broadcast_to(xp.eye(A.shape[-1], dtype=A.dtype), A.shape), A)
    if n == 0:
        return eye + mul(A, 0)  # (A·0 keeps the identity in A's graph: a gradient of zeros, as torch's)
    out, square = None, A
    while n:
        if n & 1:
            out = square if out is None else matmul(out, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    return out


def vander(x, *, N=None):
    """The Vandermonde matrix: ``out[…, i, j] = x[…, i] ** j`` for ``j < N`` (``N`` defaults to ``x``'s last size),
    built by repeated multiplication so that ``x = 0`` has a finite gradient.

    >>> import tinyattn as ta
    >>> ta.linalg.vander(ta.tensor([1.0, 2.0, 3.0]))
    tensor([[1., 1., 1.],
            [1., 2., 4.],
            [1., 3., 9.]])
    """
    if x.ndim == 0:
        x = reshape(x, 1)
    N = x.shape[-1] if N is None else N
    if N <= 0:
        raise RuntimeError(f"linalg.vander: N must be greater than 1, got {N}")
    if x.dtype.kind in "biu":
        x = x.to(np.int64)
    columns = [ones_like(x)]  # (…, n) each
    for _ in range(N - 1):
        columns.append(mul(columns[-1], x))
    return stack(columns, -1)  # (…, n, N)


# ----------------------------------------------------------------------------- einsum


def _parse(equation, operands):
    """Each operand's subscripts and the output's, as lists of labels: letters, and ``("…", k)`` for the k-th
    dimension of the ellipsis counted from its right (so that the ellipses of all operands line up)."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    inputs = inputs.split(",")
    if len(inputs) != len(operands):
        raise RuntimeError(f"einsum(): {len(inputs)} subscripts for {len(operands)} operands in {equation!r}")
    ellipsis_rank = 0
    labels = []
    for i, (subscripts, operand) in enumerate(zip(inputs, operands)):
        head, dots, tail = subscripts.partition("...")
        for part in (head, tail):
            if part and not part.isalpha():
                raise RuntimeError(f"einsum(): invalid subscript in {subscripts!r}; use letters a-z, A-Z")
        named = len(head) + len(tail)
        if named > operand.ndim or (not dots and named != operand.ndim):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) does not match the "
                               f"number of dimensions ({operand.ndim}) for operand {i}"
                               + (" and no ellipsis was given" if not dots else ""))
        rank = operand.ndim - named if dots else 0
        ellipsis_rank = builtins.max(ellipsis_rank, rank)
        labels.append(list(head) + [("…", k) for k in range(rank - 1, -1, -1)] + list(tail))
    ellipsis = [("…", k) for k in range(ellipsis_rank - 1, -1, -1)]
    if arrow:
        head, dots, tail = output.partition("...")
        out = list(head) + (ellipsis if dots else []) + list(tail)
        letters = [c for c in out if isinstance(c, str)]
        for c in letters:
            if not c.isalpha():
                raise RuntimeError(f"einsum(): invalid subscript {c!r} in the output; use letters a-z, A-Z")
            if letters.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            if not any(c in subscripts for subscripts in labels):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any "
                                   "input operand")
    else:  # implicit: the ellipsis, then the letters seen once, in alphabetical order
        every = [c for subscripts in labels for c in subscripts if isinstance(c, str)]
        out = ellipsis + sorted(c for c in set(every) if every.count(c) == 1)
    return labels, out


def _diagonal(operand, labels):
    """``operand`` with each label repeated within it read along its diagonal: one dimension per distinct label."""
    distinct = list(dict.fromkeys(labels))
    if len(distinct) == len(labels):
        return operand, labels
    xp = backend.namespace(operand._data)
    sizes = {label: n for label, n in zip(labels, operand.shape)}
    position = {label: i for i, label in enumerate(distinct)}
    index = tuple(xp.arange(sizes[label]).reshape([-1 if j == position[label] else 1 for j in range(len(distinct))])
                  for label in labels)  # every dimension picked by its label's position (advanced: adjacent)
    return getitem(operand, index), distinct


def _sum_out(operand, labels, keep):
    """``operand`` summed over its labels that ``keep`` does not hold."""
    gone = [i for i, label in enumerate(labels) if label not in keep]
    if not gone:
        return operand, labels
    return sum(operand, dim=tuple(gone)), [label for label in labels if label in keep]


def _contract(a, a_labels, b, b_labels, keep):
    """``a`` and ``b`` multiplied and summed over the labels they share that ``keep`` does not hold, by one
    ``matmul``: ``(batch, left, inner) @ (batch, inner, right)``; returns the result and its labels."""
    a, a_labels = _sum_out(a, a_labels, keep | set(b_labels))
    b, b_labels = _sum_out(b, b_labels, keep | set(a_labels))
    sizes = {}
    for label, n in itertools.chain(zip(a_labels, a.shape), zip(b_labels, b.shape)):
        if sizes.get(label, 1) not in (1, n) and n != 1:
            raise RuntimeError(f"einsum(): operands do not broadcast: subscript {label} has sizes {sizes[label]} "
                               f"and {n}")
        sizes[label] = builtins.max(sizes.get(label, 1), n)
    shared = [label for label in a_labels if label in b_labels]
    batch = [label for label in shared if label in keep]
    inner_labels = [label for label in shared if label not in keep]
    left = [label for label in a_labels if label not in b_labels]
    right = [label for label in b_labels if label not in a_labels]

    def arranged(t, labels, order, rows, columns):
        t = permute(t, *[labels.index(label) for label in order])
        full = tuple(sizes[label] if label in shared else t.shape[i] for i, label in enumerate(order))
        if full != tuple(t.shape):
            t = t.expand(*full)  # a size-1 subscript broadcast against the other operand's
        return reshape(t, -1, rows, columns)

    n = lambda labels: int(np.prod([sizes[label] for label in labels]))  # noqa: E731
    a3 = arranged(a, a_labels, batch + left + inner_labels, n(left), n(inner_labels))  # (B, L, K)
    b3 = arranged(b, b_labels, batch + inner_labels + right, n(inner_labels), n(right))  # (B, K, R)
    out = matmul(a3, b3)  # (B, L, R)
    labels = batch + left + right
    return reshape(out, *[sizes[label] for label in labels]), labels


def einsum(equation, *operands):
    """A sum of products over named indices: ``einsum("bqd,bkd->bqk", q, k)`` is ``Σ_d q[b,q,d]·k[b,k,d]``.

    The operands come as arguments or as one list. Subscripts are letters, with ``...`` for the dimensions not
    named (they broadcast), an index repeated within an operand reads its diagonal, and without ``->`` the output
    is the ellipsis then the indices seen once, in alphabetical order. Operands are contracted two at a time,
    left to right, each contraction one ``matmul``.

    >>> import tinyattn as ta
    >>> q, k = ta.ones(2, 3, 4), ta.ones(2, 5, 4)
    >>> ta.einsum("bqd,bkd->bqk", q, k).shape
    (2, 3, 5)
    >>> ta.einsum("ii", ta.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(5.)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str) or not operands or not builtins.all(isinstance(t, Tensor) for t in operands):
        raise TypeError("einsum(): expected an equation string, then tensors as operands (or one list of them)")
    labels, output = _parse(equation, operands)
    dtype = np.result_type(*(t.dtype for t in operands))
    operands = [t if t.dtype == dtype else t.to(dtype) for t in operands]
    pairs = [_diagonal(t, subscripts) for t, subscripts in zip(operands, labels)]
    out, out_labels = pairs[0]
    for i, (t, subscripts) in enumerate(pairs[1:], start=1):
        later = {label for _, rest in pairs[i + 1:] for label in rest}
        out, out_labels = _contract(out, out_labels, t, subscripts, set(output) | later)
    out, out_labels = _sum_out(out, out_labels, set(output))
    missing = [label for label in output if label not in out_labels]  # an ellipsis dimension no operand had
    for label in missing:
        out, out_labels = reshape(out, *out.shape, 1), out_labels + [label]
    return permute(out, *[out_labels.index(label) for label in output]) if out_labels != output else out


# ----------------------------------------------------------------------------- tensor methods

for _name in ("addmm", "addmv", "addbmm", "baddbmm", "addr", "dot", "vdot", "mm", "mv", "outer", "ger", "inner",
              "kron", "cross"):
    setattr(Tensor, _name, globals()[_name])
Tensor.bmm = bmm
