"""Floor 4: the sets a distribution's parameters and values must lie in, as ``torch.distributions.constraints``.

A constraint's ``check(value)`` gives a boolean array, one entry per element (per event for a vector
constraint such as ``simplex``); distributions check their arguments against ``arg_constraints`` and, in
``log_prob``, the values against ``support`` (when ``validate_args`` is on, torch's default).

>>> from tinyattn.distributions import constraints
>>> import numpy as np
>>> constraints.positive.check(np.array([1.0, 0.0])).tolist()
[True, False]
>>> constraints.simplex.check(np.array([0.25, 0.75])).item()
True
"""

import numpy as np

from ..engine import Tensor

__all__ = ["Constraint", "real", "real_vector", "positive", "nonnegative", "unit_interval", "boolean", "simplex",
           "one_hot", "nonnegative_integer", "lower_cholesky", "positive_definite", "interval", "integer_interval",
           "dependent"]


def _array(value):
    return np.asarray(value._data if isinstance(value, Tensor) else value)


class Constraint:
    """A set of values: ``check(value)`` says, per element (per event for ``event_dim`` > 0), whether it lies in it.

    Args:
        name: how the constraint prints.
        test: a function of a NumPy array giving a boolean array of the same shape.
        event_dim: how many rightmost dimensions one event spans (the test reduces them).
        is_discrete: whether the set is of integers.

    >>> c = Constraint("positive", lambda x: x > 0)
    >>> c, c.check([1.0, -1.0]).tolist()
    (positive, [True, False])
    """

    def __init__(self, name, test, event_dim=0, is_discrete=False):
        self.name, self.test, self.event_dim, self.is_discrete = name, test, event_dim, is_discrete

    def check(self, value):
        return np.asarray(self.test(_array(value)))

    def __repr__(self):
        return self.name


def _is_integer(x):
    return x == np.floor(x)


real = Constraint("real", lambda x: x == x)
real_vector = Constraint("real_vector", lambda x: (x == x).all(-1), event_dim=1)
positive = Constraint("positive", lambda x: x > 0)
nonnegative = Constraint("nonnegative", lambda x: x >= 0)
unit_interval = Constraint("unit_interval", lambda x: (x >= 0) & (x <= 1))
boolean = Constraint("boolean", lambda x: (x == 0) | (x == 1), is_discrete=True)
simplex = Constraint("simplex", lambda x: (x >= 0).all(-1) & (np.abs(x.sum(-1) - 1) < 1e-6), event_dim=1)
one_hot = Constraint("one_hot", lambda x: ((x == 0) | (x == 1)).all(-1) & (x.sum(-1) == 1), event_dim=1,
                     is_discrete=True)
nonnegative_integer = Constraint("nonnegative_integer", lambda x: (x >= 0) & _is_integer(x), is_discrete=True)
lower_cholesky = Constraint(
    "lower_cholesky",
    lambda x: (np.triu(x, 1) == 0).all((-2, -1)) & (np.diagonal(x, axis1=-2, axis2=-1) > 0).all(-1), event_dim=2)


def _positive_definite(x):
    symmetric = np.isclose(x, np.swapaxes(x, -1, -2), atol=1e-6).all((-2, -1))
    return symmetric & (np.linalg.eigvalsh((x + np.swapaxes(x, -1, -2)) / 2) > 0).all(-1)


positive_definite = Constraint("positive_definite", _positive_definite, event_dim=2)
dependent = Constraint("dependent", lambda x: np.ones(np.shape(x), dtype=bool))  # not checked, as in torch


def interval(lower_bound, upper_bound):
    """The closed interval ``[lower_bound, upper_bound]`` (numbers or tensors, broadcast against the value).

    >>> interval(0.0, 2.0).check([1.0, 3.0]).tolist()
    [True, False]
    """
    low, high = _array(lower_bound), _array(upper_bound)
    return Constraint(f"interval(lower_bound={lower_bound}, upper_bound={upper_bound})",
                      lambda x: (low <= x) & (x <= high))


def integer_interval(lower_bound, upper_bound):
    """The integers in ``[lower_bound, upper_bound]``.

    >>> integer_interval(0, 2).check([1.0, 1.5, 3.0]).tolist()
    [True, False, False]
    """
    low, high = _array(lower_bound), _array(upper_bound)
    return Constraint(f"integer_interval(lower_bound={lower_bound}, upper_bound={upper_bound})",
                      lambda x: (low <= x) & (x <= high) & _is_integer(x), is_discrete=True)
