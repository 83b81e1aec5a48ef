"""torch's public API, walked from torch itself, and each name's standing in ``tinyattn.compat``.

    python tests/compat/inventory.py                       # the counts per namespace
    python tests/compat/inventory.py --missing torch.nn    # the names of one namespace compat does not classify
    python tests/compat/inventory.py --markdown docs/compat_inventory.md

Every public name of the namespaces below (``__all__`` where the module has one, else its public attributes but the
modules and typing helpers it merely imports; ``torch.Tensor``'s methods, properties and the operators torch
defines; the public submodules of ``torch`` itself; ``__version__``) is one of:

* **implemented**: compat's module (``torch.nn.functional`` is ``tinyattn.compat.nn.functional``, ``torch.Tensor``
  is compat's ``Tensor``) has the attribute, and it is not a refusal;
* **refused**: compat's attribute is a refusal made by ``tinyattn.compat.refusals.refused``, an error saying what
  to do instead;
* **out of scope**: compat has no such attribute, and ``tinyattn.compat.scope`` names the reason (asking for it
  raises an ``AttributeError`` that gives the reason);
* **unclassified**: none of these. ``tests/compat/test_inventory.py`` fails while any name is unclassified.
"""

import argparse
import ast
import importlib
import inspect
import pathlib
import pkgutil
import subprocess
import sys
import types
import warnings

NAMESPACES = [
    "torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.utils",
    "torch.nn.utils.rnn", "torch.optim", "torch.optim.lr_scheduler", "torch.utils.data", "torch.autograd",
    "torch.func", "torch.amp", "torch.backends", "torch.cuda", "torch.distributions", "torch.utils.tensorboard",
    "torch.distributed", "torch.utils.checkpoint", "torch.serialization", "torch.linalg",
]


def torch_namespaces():
    """The namespaces walked: ``NAMESPACES`` and every ``torch.nn.modules.*`` module."""
    import torch.nn.modules

    paths = [f"torch.nn.modules.{m.name}" for m in pkgutil.iter_modules(torch.nn.modules.__path__)
             if not m.name.startswith("_")]
    return NAMESPACES[:4] + ["torch.nn.modules", *sorted(paths)] + NAMESPACES[4:]


def _imported_only(namespace, value):
    """Whether ``value`` is something ``namespace`` merely imports: another package's module, a typing helper."""
    if isinstance(value, types.ModuleType):
        return not value.__name__.startswith(namespace + ".")
    return getattr(value, "__module__", None) in ("typing", "typing_extensions", "collections.abc")


def _static_all(module_name):
    """The names a module's ``__init__`` imports, read without importing it (``torch.utils.tensorboard`` needs the
    ``tensorboard`` package to import)."""
    spec = importlib.util.find_spec(module_name)
    tree = ast.parse(pathlib.Path(spec.origin).read_text())
    return sorted(alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                  and node.level > 0 for alias in node.names)


def _submodules(module):
    """A package's public submodules, found on disk: what ``dir()`` shows of them depends on what was imported."""
    if not hasattr(module, "__path__"):
        return set()
    return {m.name for m in pkgutil.iter_modules(module.__path__) if not m.name.startswith("_")}


def _fresh_module_attributes():
    """The public module-like attributes ``torch`` has right after ``import torch`` (``torch.ops``,
    ``torch.classes``…), read in a fresh interpreter so that what this process imported does not count."""
    code = ("import types, torch\nprint(' '.join(n for n in dir(torch) if not n.startswith('_') and "
            "isinstance(getattr(torch, n), types.ModuleType) and getattr(torch, n).__name__.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def torch_names(namespace):
    """The public names of one torch namespace, sorted; the same whatever else the process has imported."""
    import torch

    if namespace == "torch.Tensor":
        defined = set(vars(torch.Tensor)) | set(vars(torch._C.TensorBase))
        return sorted(n for n in dir(torch.Tensor)
                      if not n.startswith("_") or (n.startswith("__") and n.endswith("__") and n in defined
                                                   and n not in ("__dict__", "__doc__", "__module__",
                                                                 "__weakref__", "__annotations__", "__slots__")))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importlib.import_module(namespace)
    except ImportError:
        return _static_all(namespace)
    if namespace == "torch":
        return sorted(set(torch.__all__) | _submodules(torch) | _fresh_module_attributes() | {"__version__"})
    names = getattr(module, "__all__", None)
    if names is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            names = [n for n in dir(module) if not n.startswith("_")
                     and not isinstance(getattr(module, n), types.ModuleType)
                     and not _imported_only(namespace, getattr(module, n))]
        names = set(names) | _submodules(module)
    return sorted(set(names))


def compat_object(namespace):
    """compat's counterpart of a torch namespace (``None`` where compat has none)."""
    import tinyattn.compat as compat

    if namespace == "torch.Tensor":
        return compat.Tensor
    try:
        return importlib.import_module("tinyattn.compat" + namespace[len("torch"):])
    except ImportError:
        return None


def classify(namespace, name, owner):
    """``("implemented" | "refused" | "out of scope" | "unclassified", reason or "")`` for ``namespace.name``."""
    from tinyattn.compat.refusals import is_refused
    from tinyattn.compat.scope import out_of_scope

    if owner is not None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = inspect.getattr_static(owner, name) if inspect.isclass(owner) else getattr(owner, name)
        except AttributeError:
            pass
        else:
            if is_refused(value) or is_refused(getattr(value, "__func__", None)):
                return "refused", value.refusal if hasattr(value, "refusal") else value.__func__.refusal
            return "implemented", ""
    reason = out_of_scope(f"{namespace}.{name}")
    return ("out of scope", reason) if reason else ("unclassified", "")


def inventory():
    """``{namespace: {name: (standing, reason)}}`` for every namespace walked."""
    table = {}
    for namespace in torch_namespaces():
        owner = compat_object(namespace)
        table[namespace] = {name: classify(namespace, name, owner) for name in torch_names(namespace)}
    return table


STANDINGS = ("implemented", "refused", "out of scope", "unclassified")


def counts(table):
    """``{namespace: {standing: count}}``."""
    return {namespace: {s: sum(1 for standing, _ in names.values() if standing == s) for s in STANDINGS}
            for namespace, names in table.items()}


def markdown(table):
    """The generated page: counts per namespace, then the refusals and the out-of-scope reasons, grouped."""
    import torch

    lines = [f"<!-- generated by `python tests/compat/inventory.py --markdown docs/compat_inventory.md` from "
             f"torch {torch.__version__.split('+')[0]}; do not edit by hand -->", "",
             "| namespace | torch's names | implemented | refused | out of scope | unclassified |",
             "|---|---:|---:|---:|---:|---:|"]
    total = dict.fromkeys(STANDINGS, 0)
    for namespace, row in counts(table).items():
        size = sum(row.values())
        lines.append(f"| `{namespace}` | {size} | " + " | ".join(str(row[s]) for s in STANDINGS) + " |")
        for s in STANDINGS:
            total[s] += row[s]
    lines.append(f"| **all** | **{sum(total.values())}** | " + " | ".join(f"**{total[s]}**" for s in STANDINGS)
                 + " |")
    for standing, title in (("refused", "Refused on purpose"), ("out of scope", "Out of scope")):
        groups = {}
        for namespace, names in table.items():
            for name, (s, reason) in names.items():
                if s == standing:
                    groups.setdefault(reason, []).append(f"{namespace}.{name}")
        lines += ["", f"### {title}", "", "| reason | names |", "|---|---|"]
        for reason, names in sorted(groups.items(), key=lambda item: -len(item[1])):
            shown = ", ".join(f"`{n}`" for n in names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12
                                                                else "")
            lines.append(f"| {reason} | {len(names)}: {shown} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", help="write the generated page here")
    parser.add_argument("--missing", metavar="NAMESPACE", help="list this namespace's unclassified names")
    args = parser.parse_args(argv)
    table = inventory()
    if args.missing:
        print(" ".join(n for n, (s, _) in table[args.missing].items() if s == "unclassified"))
        return
    if args.markdown:
        pathlib.Path(args.markdown).write_text(markdown(table))
    for namespace, row in counts(table).items():
        print(f"{namespace:45s} " + "  ".join(f"{s} {row[s]:4d}" for s in STANDINGS))


if __name__ == "__main__":
    sys.exit(main())
