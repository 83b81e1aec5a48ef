"""``torch.distributions.transforms``: the native transforms."""

from ...distributions.transforms import *  # noqa: F401,F403
from ...distributions.transforms import __all__  # noqa: F401
