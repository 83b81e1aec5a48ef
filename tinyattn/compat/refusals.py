"""What compat refuses on purpose: a name torch has, present here, that raises an error saying what to do instead.

``refused("torch.nn.SyncBatchNorm", "one process has no batch to synchronise; use nn.BatchNorm1d")`` is a
callable that raises ``NotImplementedError`` with that message whenever it is called (a class refused this way
is refused at construction). The inventory (``tests/compat/inventory``) counts a name as *refused* when its
compat attribute carries the ``refusal`` this function sets, so a refusal is written once, where it acts.

>>> from tinyattn.compat.refusals import refused
>>> stub = refused("torch.cuda.memory_summary", "no CUDA GPU here")
>>> stub.refusal
'no CUDA GPU here'
>>> stub()
Traceback (most recent call last):
...
NotImplementedError: torch.cuda.memory_summary is not supported by tinyattn.compat: no CUDA GPU here
"""


def refused(qualified_name, why, error=NotImplementedError):
    """A callable standing for ``qualified_name`` that raises ``error`` naming it and saying ``why``."""

    def refuse(*args, **kwargs):
        raise error(f"{qualified_name} is not supported by tinyattn.compat: {why}")

    refuse.__name__ = refuse.__qualname__ = qualified_name.rsplit(".", 1)[-1]
    refuse.__doc__ = f"Refused: ``{qualified_name}`` {why}."
    refuse.refusal = why
    return refuse


def is_refused(value):
    """Whether ``value`` is a refusal made by ``refused``."""
    try:
        return isinstance(getattr(value, "refusal", None), str)
    except Exception:  # an object whose every attribute raises (a refused torch submodule) is not one
        return False
