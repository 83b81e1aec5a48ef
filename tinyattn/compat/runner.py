"""Run an unmodified PyTorch script on tinyattn: ``python -m tinyattn.compat script.py [args…]``.

For that run, every ``import torch`` and ``from torch… import`` resolves to ``tinyattn.compat`` and its
submodules (``torch.nn.functional`` to ``tinyattn.compat.nn.functional``, ``torch.utils.data`` to
``tinyattn.compat.utils.data``…), through a finder placed first on ``sys.meta_path``, so that no import in the
script reaches an installed torch and no half-real torch can arise. A torch module compat does not provide stops
the import with a ``ModuleNotFoundError`` that names it.

>>> import subprocess, sys, tempfile, pathlib
>>> script = pathlib.Path(tempfile.mkdtemp()) / "train.py"
>>> _ = script.write_text("import sys, torch\\nfrom torch.nn import functional as F\\n"
...                       "print(torch.__name__, F.relu(torch.tensor([-1.0, 2.0])), sys.argv[1:])\\n")
>>> print(subprocess.run([sys.executable, "-m", "tinyattn.compat", str(script), "--steps", "3"],
...                      capture_output=True, text=True, check=True).stdout.strip())
tinyattn.compat tensor([0., 2.]) ['--steps', '3']
"""

import importlib
import importlib.abc
import importlib.util
import runpy
import sys


class TorchToCompat(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder and loader that answer ``torch`` and ``torch.X.Y`` with ``tinyattn.compat`` and ``….compat.X.Y``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        target = "tinyattn.compat" + spec.name[len("torch"):]
        try:
            return importlib.import_module(target)
        except ModuleNotFoundError as error:
            if error.name is not None and not target.startswith(error.name):
                raise  # a module compat itself imports is missing: not the script's import
            raise ModuleNotFoundError(
                f"`{spec.name}` is not provided by tinyattn.compat (this run maps every torch import to it; "
                f"there is no `{target}`)", name=spec.name) from None

    def exec_module(self, module):
        """Nothing to run: the module is compat's, already imported."""


def run(script, args=()):
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *args]`` and torch's imports mapped to compat.

    The mapping is in place for the rest of the process (as a script's own imports may happen late, inside a
    function); it refuses to start where a real ``torch`` is already imported, which would leave two torches.

    >>> run("missing.py")
    Traceback (most recent call last):
    ...
    FileNotFoundError: python -m tinyattn.compat: no script missing.py
    """
    import os

    if not os.path.exists(script):
        raise FileNotFoundError(f"python -m tinyattn.compat: no script {script}")
    real = sys.modules.get("torch")
    if real is not None and not real.__name__.startswith("tinyattn"):
        raise RuntimeError("python -m tinyattn.compat: the real torch is already imported in this process; "
                           "run the script in a fresh interpreter")
    if not any(isinstance(finder, TorchToCompat) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchToCompat())
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python script.py` does
    runpy.run_path(script, run_name="__main__")
