"""``torch.einsum``: a sum of products over named indices, one differentiable node.

The gradient of one operand is an ``einsum`` too: the upstream gradient times the other operands,
summed onto that operand's indices. An index only that operand has (summed away in the output) gets
the gradient broadcast along it. Subscripts are explicit letters, with or without ``->`` (as NumPy
reads them); ``...`` and an index repeated within one operand (a diagonal) are refused.

>>> import tinyattn.compat as torch
>>> q, k = torch.ones(2, 3, 4), torch.ones(2, 5, 4)
>>> torch.einsum("bqd,bkd->bqk", q, k).shape
(2, 3, 5)
"""

import numpy as np

from .. import backend
from ..engine import Function
from ..engine import Tensor as _NativeTensor


def _parse(equation, operands):
    """``(inputs, output)``: the subscripts of each operand and of the result, as strings of letters."""
    equation = equation.replace(" ", "")
    if "." in equation:
        raise NotImplementedError("einsum: '...' is not supported by tinyattn.compat; name every dimension")
    inputs, arrow, output = equation.partition("->")
    inputs = inputs.split(",")
    if len(inputs) != len(operands):
        raise RuntimeError(f"einsum(): {len(inputs)} subscripts for {len(operands)} operands in {equation!r}")
    for i, (subscripts, operand) in enumerate(zip(inputs, operands)):
        if not subscripts.isalpha() and subscripts:
            raise RuntimeError(f"einsum(): invalid subscript in {subscripts!r}; use letters a-z, A-Z")
        if len(subscripts) != operand.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(subscripts)}) does not "
                               f"match the number of dimensions ({operand.ndim}) for operand {i}")
        if len(set(subscripts)) != len(subscripts):
            raise NotImplementedError(f"einsum: the index repeated in {subscripts!r} (a diagonal) is not supported "
                                      "by tinyattn.compat")
    letters = "".join(inputs)
    if not arrow:  # implicit mode: the indices seen once, in alphabetical order
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    for c in output:
        if c not in letters or output.count(c) > 1:
            raise RuntimeError(f"einsum(): output subscript {c} "
                               + ("appears more than once in the output" if c in letters
                                  else "does not appear in the equation for any input operand"))
    return inputs, output


class Einsum(Function):
    """``out = einsum(equation, *operands)``; each operand's gradient is ``einsum`` of the upstream gradient
    with the other operands onto its own subscripts."""

    saved_inputs, saves_output, differentiable = None, False, True

    def forward(self, *arrays, inputs=None, output=None):
        self.arrays, self.inputs, self.output = arrays, inputs, output
        equation = ",".join(inputs) + "->" + output
        return backend.namespace(arrays[0]).einsum(equation, *arrays)

    def backward(self, grad):
        if isinstance(grad, _NativeTensor):  # create_graph: the same einsums, as operations on the input tensors
            xp, arrays = _OnTensors, self.parents
        else:
            xp, arrays = backend.namespace(grad), self.arrays
        sizes = {c: n for subscripts, array in zip(self.inputs, arrays) for c, n in zip(subscripts, array.shape)}
        grads = []
        for i, (subscripts, array) in enumerate(zip(self.inputs, arrays)):
            others = [(s, a) for j, (s, a) in enumerate(zip(self.inputs, arrays)) if j != i]
            present = set(self.output).union(*(set(s) for s, _ in others))
            kept = "".join(c for c in subscripts if c in present)  # the indices the einsum below can produce
            equation = ",".join([self.output] + [s for s, _ in others]) + "->" + kept
            partial = xp.einsum(equation, grad, *(a for _, a in others))
            if kept != subscripts:  # broadcast along the indices only this operand had
                shape = [sizes[c] if c in kept else 1 for c in subscripts]
                partial = xp.broadcast_to(partial.reshape(shape), array.shape)
            grads.append(xp.ascontiguousarray(partial, dtype=array.dtype))
        return tuple(grads)

    @staticmethod
    def jvp(tangents, operands, out, **subscripts):  # multilinear: Σᵢ einsum(…, dxᵢ, …)
        total = None
        for i, t in enumerate(tangents):
            if t is not None:
                term = Einsum.apply(*operands[:i], t, *operands[i + 1:], **subscripts)
                total = term if total is None else total + term
        return total


class _OnTensors:
    """The three array functions ``Einsum.backward`` calls, on tensors."""

    @staticmethod
    def einsum(equation, *operands):
        inputs, output = equation.split("->")
        return Einsum.apply(*operands, inputs=inputs.split(","), output=output)

    @staticmethod
    def broadcast_to(x, shape):
        return x.expand(*shape)

    @staticmethod
    def ascontiguousarray(x, dtype):
        return x if x.dtype == dtype else x.to(dtype)


def einsum(equation, *operands):
    """``torch.einsum(equation, *operands)`` (operands as arguments or as one list)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(t, _NativeTensor) for t in operands):
        raise TypeError("einsum(): expected tensors as operands")
    inputs, output = _parse(equation, operands)
    dtype = np.result_type(*(t.dtype for t in operands))
    operands = [t if t.dtype == dtype else t.to(dtype) for t in operands]
    return Einsum.apply(*operands, inputs=inputs, output=output)
