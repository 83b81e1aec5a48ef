"""The debugger recipe in the README and in docs/reading-the-source.md runs and stops in the reference
softmax's backward, and the ``ta.explain`` lines that page shows for the main example's model, compiled, are
what ``ta.explain`` prints."""

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import tinyattn as ta

ROOT = Path(__file__).resolve().parents[2]
READING_GUIDE = ROOT / "docs" / "reading-the-source.md"


def marked_block(name, path=ROOT / "README.md"):
    """The fenced block between ``<!-- name -->`` and ``<!-- /name -->`` in ``path``."""
    text = path.read_text()
    match = re.search(rf"<!-- {name} -->\n```[a-z]*\n(.*?)```\n<!-- /{name} -->", text, re.S)
    assert match, f"{path.name} has no {name} block"
    return match.group(1)


def test_the_reading_guide_shows_the_readme_s_debugger_recipe():
    for name in ("debugger-recipe", "debugger-commands"):
        assert marked_block(name, READING_GUIDE) == marked_block(name), name


def test_the_debugger_recipe_stops_in_the_reference_softmax_backward(tmp_path):
    script = tmp_path / "step.py"
    script.write_text(marked_block("debugger-recipe"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONBREAKPOINT", None)
    result = subprocess.run([sys.executable, str(script)], input=marked_block("debugger-commands"), text=True,
                            capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    functional = str(ROOT / "tinyattn" / "nn" / "functional.py")
    assert f"> {functional}(" in out and ")backward()" in out, out  # stopped in functional.py's Softmax.backward
    assert "-> loss.backward()" in out and "fn.backward(grad)" in out, out  # reached from loss.backward()
    assert "((2, 4, 5, 5), (2, 4, 5, 5))" in out, out


def test_the_reading_guide_shows_what_explain_prints_for_the_main_example():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from reverse_digits import Reverser, make_batch
    finally:
        sys.path.remove(str(ROOT / "examples"))
    model = Reverser(64, 4, 2)
    digits, _ = make_batch(np.random.default_rng(0), 64, 10, "cpu")
    printed = ta.explain(ta.compile(model), digits, file=io.StringIO()).splitlines()
    shown = marked_block("explain-output", READING_GUIDE).splitlines()
    missing = [line for line in shown if line not in printed]
    assert not missing, missing
    order = [printed.index(line) for line in shown]
    assert order == sorted(order)
