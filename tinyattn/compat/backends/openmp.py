"""``torch.backends.openmp``: compat runs no OpenMP loops of its own."""


def is_available():
    return False
