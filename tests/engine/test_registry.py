"""The registry cannot be forgotten: every ``Function`` subclass of the library (every node an operation can
record, found by importing every module of ``tinyattn`` and walking ``__subclasses__``) has a row in
``tests/registry.py``, a JVP rule (``jvp``) and a batching rule (``tinyattn.func.batching``), unless
``EXCLUDED`` gives the reason it cannot; an exclusion that is no longer needed fails too. And a row's graph
records the nodes the row names, so that a row cannot claim a node it never reaches.
"""

import importlib
import pkgutil

import numpy as np
import pytest
from graph_checks import node_types
from hypothesis import given, settings
from hypothesis import strategies as st
from registry import ROWS, convert

import tinyattn as ta
from tinyattn.func import batching

#: Packages whose nodes the registry leaves to another table, with the reason.
EXCLUDED_PACKAGES = {
    "tinyattn.fast": "the fused nodes ta.compile swaps in: tests/equivalence/test_equivalence.py proves each against "
                     "the reference it replaces, and a transform runs the reference instead",
}

#: ``{class name: {check: reason}}``, the checks being ``row``, ``jvp`` and ``batching``.
EXCLUDED = {
    "_Binary": dict.fromkeys(("row", "jvp", "batching"), "the base of Add, Sub, Mul, Div and Pow, never applied"),
    "OnceDifferentiable": {
        "row": "a once-differentiable gradient's stand-in, only there to refuse a second differentiation by name "
               "(test_higher_order.py::test_gradgradcheck_reports_a_once_differentiable_backward)",
        "jvp": "the same refusal: a tangent through a once-differentiable gradient raises by name",
    },
    "_Hub": {"row": "joins a hooked module's tensors for its full backward hooks (tests/nn/test_module_hooks.py)",
             "batching": "vmap through a module with full backward hooks raises by name (batching.no_rule)"},
    "CopySlices": {"batching": "vmap of an in-place write through a view raises by name (batching.no_rule)"},
    **dict.fromkeys(("_Node", "_Outputs", "Pick"), {
        "batching": "a user's ta.autograd.Function gives no vmap rule (torch's generate_vmap_rule or vmap "
                    "staticmethod are not taken yet): vmap raises by name"}),
    "NoGradElementwise": dict.fromkeys(("row", "jvp"), "never recorded: its inputs come detached, for its result (a "
                                       "comparison's, a bit operation's) carries no gradient and no tangent; "
                                       "tests/ops/test_opinfo.py checks its values and vmap"),
    "StandardGamma": {
        "row": "a random draw, no function of its input to compare: tests/nn/test_distributions.py checks its "
               "gradient against torch's _standard_gamma_grad and the unbiasedness of the draws' gradients",
        "jvp": "its implicit derivative is given to reverse mode alone (rsample's use); a tangent raises by name",
        "batching": "a draw inside vmap raises by name: no batching rule",
    },
    "Checkpoint": {"jvp": "never recorded while a forward-mode level is open: checkpoint runs the function as written",
                   "batching": "checkpoint inside vmap raises by name: no batching rule yet"},
}


def _library_functions():
    """Every subclass of ``ta.Function`` defined in the library, outside ``EXCLUDED_PACKAGES``, by name."""
    for module in pkgutil.walk_packages(ta.__path__, "tinyattn."):
        importlib.import_module(module.name)
    found, stack = {}, [ta.Function]
    while stack:
        for cls in stack.pop().__subclasses__():
            stack.append(cls)
            module = cls.__module__
            if module.startswith("tinyattn.") and not any(module == p or module.startswith(p + ".")
                                                          for p in EXCLUDED_PACKAGES):
                found[cls.__name__] = cls
    return found


FUNCTIONS = _library_functions()
NAMED = {name for row in ROWS for name in row.nodes}


def _missing(cls):
    """The checks ``cls`` fails, before exclusions."""
    return {
        "row": cls.__name__ not in NAMED,
        "jvp": getattr(cls, "jvp", None) is None,
        "batching": batching.rule_of(cls) is batching.no_rule,
    }


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_has_a_row_a_jvp_rule_and_a_batching_rule(name):
    cls = FUNCTIONS[name]
    excused = EXCLUDED.get(name, {})
    what = {"row": "no row in tests/registry.py (a Spec naming it in nodes)",
            "jvp": "no JVP rule (a jvp staticmethod)", "batching": "no batching rule (tinyattn.func.batching.RULES)"}
    failing = [what[check] for check, missing in _missing(cls).items() if missing and check not in excused]
    assert not failing, f"{cls.__module__}.{name}: " + "; ".join(failing) + \
        " (or an entry in EXCLUDED of tests/engine/test_registry.py, with its reason)"


@pytest.mark.parametrize("name", sorted(EXCLUDED))
def test_every_exclusion_is_still_needed(name):
    assert name in FUNCTIONS, f"EXCLUDED names {name}, which is no Function of the library (renamed or removed?)"
    missing = _missing(FUNCTIONS[name])
    stale = [check for check in EXCLUDED[name] if not missing[check]]
    assert not stale, f"{name} now passes {stale}: drop that exclusion"


def test_every_node_a_row_names_exists():
    unknown = sorted(NAMED - set(FUNCTIONS))
    assert not unknown, f"rows name nodes that are no Function of the library: {unknown}"


WITH_NODES = [row for row in ROWS if row.nodes]


def _recorded(row, arrays, options):
    """The node names of ``row``'s graph at ``arrays``, and of its gradient's graph under ``create_graph``
    (upstream gradients that require a gradient, so that every backward operation is recorded)."""
    xs = [ta.tensor(a, requires_grad=True) for a in arrays]
    outs = row.ours(*xs, **{k: convert(v, ta.tensor) for k, v in options.items()})
    outs = [o for o in (outs if isinstance(outs, (tuple, list)) else (outs,)) if o.requires_grad]
    rng = np.random.default_rng(0)
    upstream = [ta.tensor(rng.standard_normal(o.shape).astype(o.dtype), requires_grad=True) for o in outs]
    grads = ta.autograd.grad(outs, xs, upstream, create_graph=True, allow_unused=True)
    return set().union(*(node_types(t) for t in outs + [g for g in grads if g is not None]))


@pytest.mark.parametrize("row", WITH_NODES, ids=[f"{row.tables.split()[0]}-{row.name}" for row in WITH_NODES])
@settings(max_examples=5)
@given(data=st.data())
def test_a_row_records_the_nodes_it_names(row, data):
    """Every node the row names is in its graphs, in float64, or in float32 for a row of the ``torch`` table
    (which runs both: a cast to float64 records ``To`` from float32 alone)."""
    arrays, options = data.draw(row.case, label="case")
    recorded = _recorded(row, arrays, options)
    if "torch" in row.tables.split():
        recorded |= _recorded(row, [a.astype(np.float32) for a in arrays], options)
    assert set(row.nodes) <= recorded, f"{row.name} names {sorted(set(row.nodes) - recorded)}, not recorded " \
                                       f"(its graphs hold {sorted(recorded)})"
