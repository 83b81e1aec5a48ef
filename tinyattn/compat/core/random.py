"""``torch.Generator``: a random stream of the caller's own, for ``DataLoader(shuffle=True, generator=g)``,
``random_split``, ``randperm``, ``randint`` and ``multinomial``.

Its draws come from NumPy's ``PCG64`` (torch's come from a Mersenne Twister): a generator seeded
alike gives the same draws here run after run, but not torch's draws.

>>> import tinyattn.compat as torch
>>> a = torch.randperm(5, generator=torch.Generator().manual_seed(3))
>>> b = torch.randperm(5, generator=torch.Generator().manual_seed(3))
>>> bool((a == b).all()), sorted(a.tolist())
(True, [0, 1, 2, 3, 4])
"""

import numpy as np

from ... import backend


class Generator:
    """``Generator(device="cpu")``: ``manual_seed(seed)`` (returns the generator), ``seed()``,
    ``initial_seed()``, ``get_state()`` / ``set_state(state)``."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise RuntimeError(f"Generator: only 'cpu' generators are supported, got device {str(device)!r}")
        self.device = "cpu"
        self.seed()

    def manual_seed(self, seed):
        seed = int(seed)
        if seed < 0:
            seed += 1 << 64
        self._initial_seed = seed
        self.rng = np.random.default_rng(seed)
        return self

    def seed(self):
        """Seed from fresh entropy; returns the seed."""
        seed = int(np.random.SeedSequence().entropy % (1 << 63))
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        return self._initial_seed

    def random(self, size=None):
        """Uniform float64 draws in ``[0, 1)`` of shape ``size`` (NumPy's ``Generator.random``): what the native
        samplers, ``random_split`` and ``shuffle=True`` draw from."""
        return self.rng.random(size)

    def get_state(self):
        """The stream's state, as a dict ``set_state`` takes (torch gives a byte tensor)."""
        return {"seed": self._initial_seed, "bit_generator": dict(self.rng.bit_generator.state)}

    def set_state(self, state):
        if not (isinstance(state, dict) and set(state) == {"seed", "bit_generator"}):
            raise TypeError("Generator.set_state: expected a state from Generator.get_state()")
        self._initial_seed = state["seed"]
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = dict(state["bit_generator"])
        return self


def numpy_generator(generator):
    """The NumPy generator behind ``generator`` (a compat ``Generator`` or ``None``, the library's own)."""
    if generator is None:
        return None
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    return generator.rng


def permutation(n, generator=None):
    """A random permutation of ``range(n)`` as int64 NumPy indices, from ``generator`` or the library's stream."""
    rng = numpy_generator(generator)
    if rng is None:
        keys = backend.random_uniform((n,), np.dtype(np.float64), "cpu")
        return np.argsort(keys, kind="stable").astype(np.int64)
    return rng.permutation(n).astype(np.int64)
