"""``torch.jit``: what eager model code asks of it. tinyattn runs Python and never traces or scripts a model, so
the markers model code carries for TorchScript (``@torch.jit.ignore``, ``unused``, ``export``, ``Final``,
``annotate``) leave the code as it is, ``is_scripting()`` and ``is_tracing()`` are false, and ``script``, ``trace``,
``save`` and ``load`` are refused with what to do instead.

>>> import tinyattn.compat as torch
>>> @torch.jit.ignore
... def helper(x):
...     return x + 1
>>> helper(1), torch.jit.is_scripting()
(2, False)
>>> torch.jit.script(helper)
Traceback (most recent call last):
...
NotImplementedError: torch.jit.script is not supported by tinyattn.compat: ...
"""

import typing

from .refusals import refused
from .scope import missing

_INSTEAD = "tinyattn does not trace or script models; call the module itself, and save its state_dict() with torch.save"


def _marker(fn=None, **options):
    """A TorchScript marker (``ignore``, ``unused``, ``export``…), used bare or with options: ``fn`` as it is."""
    return fn if fn is not None else (lambda fn: fn)


ignore = unused = export = interface = script_method = _marker
Final = typing.Final


def annotate(the_type, the_value):
    """``the_value`` (TorchScript's type annotation of an expression; eager code runs it as it is)."""
    return the_value


def is_scripting():
    """False: nothing here runs under TorchScript."""
    return False


def is_tracing():
    """False: nothing here runs under the tracer."""
    return False


script = refused("torch.jit.script", _INSTEAD)
trace = refused("torch.jit.trace", _INSTEAD)
trace_module = refused("torch.jit.trace_module", _INSTEAD)
script_if_tracing = _marker
save = refused("torch.jit.save", _INSTEAD)
load = refused("torch.jit.load", "tinyattn cannot run TorchScript archives; load the weights into the model's "
                                  "Python class with load_state_dict")
freeze = refused("torch.jit.freeze", _INSTEAD)
optimize_for_inference = refused("torch.jit.optimize_for_inference", _INSTEAD)
fork = refused("torch.jit.fork", "call the function; there is no TorchScript interpreter to run it asynchronously")
wait = refused("torch.jit.wait", "call the function; there is no TorchScript interpreter to run it asynchronously")
refusal = _INSTEAD  # the inventory counts torch.jit as refused

__all__ = ["ignore", "unused", "export", "interface", "script_method", "Final", "annotate", "is_scripting",
           "is_tracing", "script", "trace", "trace_module", "script_if_tracing", "save", "load", "freeze",
           "optimize_for_inference", "fork", "wait"]


def __getattr__(name):
    raise missing(__name__, name)
