"""``torch.autograd.function``: ``Function`` (static ``forward(ctx, …)``/``backward(ctx, …)``),
``FunctionCtx`` and ``once_differentiable``, the native ones. A ``backward`` written in tensor operations
is differentiable again under ``create_graph=True``; one marked ``once_differentiable`` runs without a
graph, and the gradient it gave refuses, naming the function, to be differentiated again.

>>> import tinyattn.compat as torch
>>> class Cube(torch.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x ** 3
...
...     @staticmethod
...     def backward(ctx, grad_output):
...         (x,) = ctx.saved_tensors
...         return grad_output * 3 * x * x
>>> x = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
>>> (dy,) = torch.autograd.grad(Cube.apply(x), x, create_graph=True)
>>> dy.backward()
>>> x.grad.item()                                                  # d(3x²)/dx = 6x
12.0
"""

from ...autograd import Function, FunctionCtx, once_differentiable
from ..scope import missing

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


def __getattr__(name):
    raise missing(__name__, name)
