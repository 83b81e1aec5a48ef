"""``torch.distributions.constraints``: the sets parameters and values are checked against (the native ones)."""

from ...distributions.constraints import *  # noqa: F401,F403
from ...distributions.constraints import __all__  # noqa: F401
