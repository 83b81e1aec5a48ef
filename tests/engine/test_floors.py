"""The floors hold: every import in the package, lazy ones inside functions included, points down or
sideways within its floor, and the modules' imports form no cycle.

    1 backend, modes               which array library; the calling thread's modes
    2 the engine                   engine (Tensor, Function, the walk); beside it, below it: graph (the general
                                   walk), grad_mode, hooks, anomaly, forward_mode
    3 ops and their helpers        the differentiable primitives, creation, masks, argument checks, autograd, and
                                   the op set by family (pointwise, comparison, reductions, sorting, shapes,
                                   indexing, products, linalg)
    4 the reference layer          nn (functional and the layers), optim, utils (checkpointing, data), interop,
                                   serialization, testing, distributions
    5 the fast layer               fast (compile, router, tuning, nodes, blocks, kernels, pool)
    6 on top                       compat, pretrained, viz, and the package's own __init__

The README's and the docs' reading order name the same floors. The reference floors (the engine, ops, autograd
and nn) know nothing of the fast layer: no seam, no switch, no table (``ta.compile`` swaps its forms in from above).
"""

import ast
import importlib.util
import re
from pathlib import Path

import tinyattn as ta

PACKAGE = Path(__file__).resolve().parents[2] / "tinyattn"

FLOORS = {
    "tinyattn.backend": 1, "tinyattn.modes": 1,
    "tinyattn.engine": 2, "tinyattn.graph": 2, "tinyattn.grad_mode": 2, "tinyattn.hooks": 2,
    "tinyattn.anomaly": 2, "tinyattn.forward_mode": 2,
    "tinyattn.ops": 3, "tinyattn.ops_extra": 3, "tinyattn.inplace": 3, "tinyattn.creation": 3,
    "tinyattn.checks": 3, "tinyattn.masks": 3, "tinyattn.autograd": 3,
    "tinyattn.pointwise": 3, "tinyattn.comparison": 3, "tinyattn.reductions": 3, "tinyattn.sorting": 3,
    "tinyattn.shapes": 3,
    "tinyattn.indexing": 3, "tinyattn.products": 3, "tinyattn.linalg": 3,
    "tinyattn.autograd.functional": 6,  # Jacobians and Hessians, built on ta.func (vmap) as torch's are
    "tinyattn.nn": 4, "tinyattn.optim": 4, "tinyattn.interop": 4, "tinyattn.serialization": 4,
    "tinyattn.testing": 4, "tinyattn.utils": 4, "tinyattn.checkpointing": 4, "tinyattn.distributions": 4,
    "tinyattn.fast": 5,
    "tinyattn.compat": 6, "tinyattn.pretrained": 6, "tinyattn.viz": 6, "tinyattn": 6,
}


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def floor(module):
    """The floor of a module: that of the longest prefix in FLOORS."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in FLOORS:
            return FLOORS[prefix]
    raise AssertionError(f"{module} is on no floor: add it to FLOORS")


def package_of(module):
    """The package a module belongs to: its directory (a package's ``__init__`` belongs to the package itself)."""
    path = MODULES.get(module)
    if path is None:  # not a module of the library: a name inside ``module.rsplit(".", 1)[0]``, or a package
        return module
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def import_source(node, package):
    """The library module an ``ImportFrom`` node imports from (its dots resolved against ``package``), or None."""
    if node.level:
        base = package.split(".")
        base = base[: len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    if node.module and node.module.startswith("tinyattn"):
        return node.module
    return None


def imports(module):
    """The library modules ``module`` imports, anywhere in its source (functions included)."""
    package = package_of(module)
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("tinyattn"))
        elif isinstance(node, ast.ImportFrom) and (source := import_source(node, package)) is not None:
            for alias in node.names:  # `from . import backend` imports the module tinyattn.backend
                candidate = f"{source}.{alias.name}"
                found.add(candidate if candidate in MODULES else source)
    return {name for name in found if name in MODULES and name != module}


def is_private(name):
    return name.startswith("_") and not name.endswith("__")


def private_crossing(dotted, package):
    """The first private part of the dotted name ``dotted`` (a module, or a name inside one) held by another package
    than ``package``, as ``"holder._name"``, or None: ``tinyattn.compat._tensor.as_compat`` seen from
    ``tinyattn.compat.nn`` gives ``tinyattn.compat._tensor``, seen from ``tinyattn.compat`` nothing. Only the
    modules' own names count: an attribute of one of them (``Layer._sa_block``, a method named as PyTorch names
    it) is the class's."""
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        holder = ".".join(parts[:i])
        if holder not in MODULES:  # past the modules: an attribute of a module's name (a class's method…)
            return None
        if is_private(parts[i]) and package_of(holder) != package:
            return f"{holder}.{parts[i]}"
    return None


def private_names_crossing(module):
    """Each private name ``module`` takes from another package (``from X import _name``, ``import X._name``,
    ``from X._name import y``, or ``m._name`` and ``m.sub._name`` where ``m`` is bound to a library module),
    as ``"holder._name (line n)"``. A package is a directory: a module's own package may share its private
    names, no other may."""
    package, bound, found = package_of(module), {}, set()
    tree = ast.parse(MODULES[module].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tinyattn"):
                    bound[alias.asname or "tinyattn"] = alias.name if alias.asname else "tinyattn"
                    if crossing := private_crossing(alias.name, package):
                        found.add(f"{crossing} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and (source := import_source(node, package)) is not None:
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                if candidate in MODULES:
                    bound[alias.asname or alias.name] = candidate
                if crossing := private_crossing(candidate, package):
                    found.add(f"{crossing} (line {node.lineno})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, root = [node.attr], node.value
            while isinstance(root, ast.Attribute):
                chain.append(root.attr)
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                dotted = ".".join([bound[root.id], *reversed(chain)])
                if crossing := private_crossing(dotted, package):
                    found.add(f"{crossing} (line {node.lineno})")
    return found


def test_every_import_points_down_or_within_its_floor():
    upward = []
    for module in MODULES:
        for target in imports(module):
            if floor(target) > floor(module):
                upward.append(f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})")
    assert not upward, "\n".join(upward)


def test_the_imports_form_no_cycle():
    """No module imports, even lazily, one that imports it back, its own package's ``__init__`` included: a
    subpackage takes what it shares with its parent from a leaf module, not from the parent that gathers it."""
    graph = {module: imports(module) for module in MODULES}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append(" -> ".join(stack[stack.index(target):] + [target]))
            elif target not in state:
                visit(target, stack + [target])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


def test_no_private_name_crosses_a_package():
    """Each floor offers the floors above a small public interface: no module takes a ``_name`` (a function, a
    class, a module) from a package other than its own, by import or as a module's attribute."""
    offenders = {m: sorted(found) for m in MODULES if (found := private_names_crossing(m))}
    assert not offenders, "\n".join(f"{m}: {', '.join(found)}" for m, found in offenders.items())


def test_the_private_check_sees_what_it_looks_for(tmp_path, monkeypatch):
    """``private_names_crossing`` finds each way a private name can cross a package, and lets a package's own
    private names pass (the test above proves nothing otherwise)."""
    forms = {
        "from ..nn.functional import _linear": {"tinyattn.nn.functional._linear (line 1)"},
        "from .. import _checks as check": {"tinyattn._checks (line 1)"},
        "from ..compat._tensor import as_compat": {"tinyattn.compat._tensor (line 1)"},
        "import tinyattn._checks as check": {"tinyattn._checks (line 1)"},
        "from ..nn import functional as F\nF._attention(q, k, v)": {"tinyattn.nn.functional._attention (line 2)"},
        "import tinyattn.nn.functional as F\nx = F._linear": {"tinyattn.nn.functional._linear (line 2)"},
        "import tinyattn\ntinyattn.nn.functional._linear(x)": {"tinyattn.nn.functional._linear (line 2)"},
        "from .. import ops\nops._lift(1, x)": {"tinyattn.ops._lift (line 2)"},
        "from ..nn import transformer\ntransformer.TransformerEncoderLayer._sa_block": set(),  # the class's
        "from .router import _choose\nfrom . import router\nrouter._choose(x)": set(),  # its own package
        "from ..nn.functional import linear_definition\nfrom .. import ops\nops.__name__": set(),
    }
    path = tmp_path / "case.py"
    monkeypatch.setitem(MODULES, "tinyattn.fast.case", path)
    for lines, expected in forms.items():
        path.write_text(lines + "\n")
        assert private_names_crossing("tinyattn.fast.case") == expected, lines


def test_the_reference_layer_knows_nothing_of_speed():
    """``tinyattn.nn`` imports nothing of the fast layer and names no route."""
    for module in MODULES:
        if module.startswith("tinyattn.nn"):
            assert not any(t.startswith("tinyattn.fast") for t in imports(module)), module
            source = MODULES[module].read_text()
            assert "why_not" not in source and "tuning" not in source, module


REFERENCE_FLOORS = ("tinyattn.engine", "tinyattn.graph", "tinyattn.grad_mode", "tinyattn.hooks", "tinyattn.anomaly",
                    "tinyattn.forward_mode", "tinyattn.modes", "tinyattn.ops", "tinyattn.ops_extra",
                    "tinyattn.autograd", "tinyattn.nn")


def names_of_the_fast_layer(module):
    """What ``module``'s source imports or names of the fast layer and of the seams it once had: a module
    ``tinyattn.fast…`` or ``tinyattn.dispatch`` imported, an identifier, attribute or word ``dispatch`` or
    ``replaceable`` (docstrings and comments included), an attribute or imported name ``fast``, the text
    ``tinyattn.fast``."""
    source = MODULES[module].read_text()
    found = {t for t in imports(module) if t.startswith(("tinyattn.fast", "tinyattn.dispatch"))}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            named = [alias.name for alias in node.names] + [alias.asname for alias in node.names if alias.asname]
            named += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            found.update(f"import of {part}" for name in named for part in name.split(".")
                         if part in ("fast", "dispatch", "replaceable"))
        elif isinstance(node, ast.Attribute) and node.attr in ("fast", "dispatch", "replaceable"):
            found.add(f"attribute .{node.attr} (line {node.lineno})")
    for match in re.finditer(r"\b(dispatch|replaceable)\b", source):
        found.add(f"the word {match.group()!r} (line {source.count(chr(10), 0, match.start()) + 1})")
    if "tinyattn.fast" in source:
        found.add("the text 'tinyattn.fast'")
    return found


def test_the_reference_floors_know_nothing_of_the_fast_layer():
    """The engine, ops, autograd and nn neither import nor name ``dispatch``, ``replaceable`` or
    ``tinyattn.fast``: no seam in them exists for what is built above."""
    checked = [m for m in MODULES if any(m == floor or m.startswith(floor + ".") for floor in REFERENCE_FLOORS)]
    assert {"tinyattn.engine", "tinyattn.graph", "tinyattn.ops", "tinyattn.ops_extra", "tinyattn.autograd.forward_ad",
            "tinyattn.nn.functional", "tinyattn.nn.module"} <= set(checked)
    offenders = {m: sorted(found) for m in checked if (found := names_of_the_fast_layer(m))}
    assert not offenders, "\n".join(f"{m}: {', '.join(found)}" for m, found in offenders.items())


def test_the_check_sees_what_it_looks_for(tmp_path, monkeypatch):
    """``names_of_the_fast_layer`` finds each form a seam could take (the test above proves nothing otherwise)."""
    forms = {
        "from ..dispatch import replaceable": {"import of dispatch", "import of replaceable"},
        "from .. import fast": {"tinyattn.fast", "import of fast"},
        "from ..fast import router": {"tinyattn.fast.router", "import of fast"},
        "import tinyattn.fast.compile": {"tinyattn.fast.compile", "import of fast", "the text 'tinyattn.fast'"},
        "x = ta.fast.router": {"attribute .fast (line 1)"},
        "# a seam: dispatch": {"the word 'dispatch' (line 1)"},
    }
    path = tmp_path / "case.py"
    monkeypatch.setitem(MODULES, "tinyattn.nn.case", path)
    for line, expected in forms.items():
        path.write_text(line + "\n")
        found = names_of_the_fast_layer("tinyattn.nn.case")
        assert expected <= found, (line, found)


def test_there_is_no_switch():
    """No ``tinyattn.dispatch`` (the old table and switch), no ``ta.use_fast_paths``, no ``TINYATTN_FAST``: speed
    is ``ta.compile``, asked for per model."""
    assert "tinyattn.dispatch" not in MODULES and importlib.util.find_spec("tinyattn.dispatch") is None
    assert not hasattr(ta, "dispatch") and not hasattr(ta, "use_fast_paths")
    assert not [module for module, path in MODULES.items() if "TINYATTN_FAST" in path.read_text()]


ENGINE_FLOOR = {"tinyattn.graph", "tinyattn.grad_mode", "tinyattn.hooks", "tinyattn.anomaly", "tinyattn.forward_mode"}


def test_the_engine_floor_holds_only_the_engine():
    """The engine imports only floor 1 (the backend, the thread's modes) and its own floor's modules, which know
    nothing of it: they work on its nodes and tensors by their attributes, so the engine reads first."""
    assert imports("tinyattn.engine") <= {"tinyattn.backend", "tinyattn.modes"} | ENGINE_FLOOR
    for module in ENGINE_FLOOR:
        assert imports(module) <= {"tinyattn.backend", "tinyattn.modes"} | ENGINE_FLOOR, module


def test_the_core_is_read_in_one_sitting():
    """The engine's file holds the whole idea (a node, ``apply``, the backward walk) in its first 150 lines, and
    is under 450 lines."""
    lines = MODULES["tinyattn.engine"].read_text().splitlines()
    assert len(lines) < 450
    first = "\n".join(lines[:150])
    assert "class Function:" in first and "def apply(" in first and "def backpropagate(" in first


def test_the_router_alone_reads_the_tuning():
    """Every decision about which code runs, and how a pass is cut, sits in ``fast.router``: no other module of the
    package (compile, kernels, pool, blocks, nodes) imports ``fast.tuning`` (tests and benchmarks may move it)."""
    readers = sorted(module for module in MODULES if "tinyattn.fast.tuning" in imports(module))
    assert readers == ["tinyattn.fast.router"]
