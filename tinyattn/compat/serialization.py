"""placeholder"""
from .. import load, save  # noqa: F401
