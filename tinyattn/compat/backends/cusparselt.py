"""``torch.backends.cusparselt``: not used (compat has no sparse kernels)."""

from ..refusals import refused

get_max_alg_id = refused("torch.backends.cusparselt.get_max_alg_id", "compat runs no cuSPARSELt kernels")


def is_available():
    return False


def version():
    return None
