"""The site's pictures, made from the code each time the documentation is built.

An mkdocs hook (``hooks:`` in mkdocs.yml): before the build it fills ``docs/figures/`` (git-ignored) with

- the examples' pictures, each example run in its ``--quick`` mode with ``--out docs/figures/<example>``;
- ``graph_attention.svg``: the autograd graph of one small attention step, drawn by ``ta.viz.render_dot``;
- ``floors.svg``: tinyattn's floors as ``tests/engine/test_floors.py`` defines them, each with its modules, and the
  imports between them;
- ``benchmark.svg``: tinyattn's time ÷ PyTorch's per row of the committed ``docs/performance_table.md``.

After the build's pages are written it also takes the doctest directives (``# doctest: +ELLIPSIS``) out of the
rendered examples, and points an ``<iframe src="figures/…">`` at the picture from wherever its page is served.

Nothing is skipped quietly: a missing Graphviz, a failing example or a picture a page names and nobody made stops
the build with the reason. The inputs' hash is kept in ``docs/figures/.inputs``; when nothing changed (``mkdocs
serve`` rebuilding after a page edit) the pictures are kept as they are. By hand::

    python docs/_ext/figures.py            # the same, into docs/figures/
    python docs/_ext/figures.py --force    # even when nothing changed
"""

import argparse
import concurrent.futures
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "figures"

# Each example, in its quick mode, and the pictures the pages show of it. The longest runs are started first.
EXAMPLES = {
    "seq2seq": ["cross_attention_0.png", "head_view.html"],
    "vit_digits": ["attention.png", "class_token.png"],
    "reverse_digits": ["attention_layer0.png", "attention_layer1.png", "loss.png"],
    "higher_order": ["tanh_derivatives.png"],
    "bert_walkthrough": ["attention_layer2.png", "head_view.html"],
    "transforms": ["per_example_grad_norms.png", "jacobian_vs_attention.png"],
    "attention_walkthrough": ["single_head.png", "head_0.png", "head_1.png"],
}


class FigureError(RuntimeError):
    """A picture could not be made; the message says which and why."""


def inputs_hash():
    """A hash of everything the pictures are made from: the library, the examples, the table, this file."""
    paths = sorted([*ROOT.glob("tinyattn/**/*.py"), *ROOT.glob("examples/*"), Path(__file__).resolve(),
                    ROOT / "docs" / "performance_table.md", ROOT / "tests" / "engine" / "test_floors.py"])
    digest = hashlib.sha256()
    for path in paths:
        if path.is_file():
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def run_example(name, out):
    """``python examples/<name>.py --quick --out <out>/<name>``, one BLAS thread (two run side by side)."""
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    result = subprocess.run([sys.executable, str(ROOT / "examples" / f"{name}.py"), "--quick", "--out", str(folder)],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
        raise FigureError(f"examples/{name}.py --quick failed (exit {result.returncode}):\n{tail}")
    missing = [file for file in EXAMPLES[name] if not (folder / file).is_file()]
    if missing:
        raise FigureError(f"examples/{name}.py --quick made no {', '.join(missing)} in {folder}")
    return time.perf_counter() - start


def need_dot():
    if shutil.which("dot") is None:
        raise FigureError("Graphviz's `dot` is not on the PATH; the documentation draws its graphs with it "
                          "(apt-get install graphviz, brew install graphviz or conda install graphviz)")


def attention_graph(path):
    """The graph ``backward()`` walks for one uncompiled attention step, softmax(Q Kᵀ / √d) V, summed."""
    import tinyattn as ta
    import tinyattn.nn.functional as F

    ta.manual_seed(0)
    query, key, value = (ta.randn(1, 3, 4, requires_grad=True) for _ in range(3))  # (B, L, E)
    out, _ = F.scaled_dot_product_attention(query, key, value)  # (B, L, E)
    ta.viz.render_dot(out.sum(), path, names={"query": query, "key": key, "value": value})


def load_floors():
    """``tests/engine/test_floors.py`` as a module: its FLOORS, MODULES, floor() and imports()."""
    spec = importlib.util.spec_from_file_location("floors", ROOT / "tests" / "engine" / "test_floors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FLOOR_NAMES = {1: "backend, modes", 2: "the engine", 3: "ops and autograd", 4: "the reference layer",
               5: "the fast layer", 6: "on top"}


def floors_dot():
    """DOT text: one box per floor (6 at the top) listing its modules, one arrow per pair of floors that import
    one from the other, labelled with the number of imports; an upward one would be drawn red."""
    import html
    import textwrap
    from collections import Counter

    floors = load_floors()

    def group(module):  # tinyattn.nn.functional -> nn; a module named in FLOORS keeps its own name
        parts = module.split(".")
        for end in range(len(parts), 1, -1):
            if ".".join(parts[:end]) in floors.FLOORS:
                return ".".join(parts[1:end])
        return ".".join(parts[1:2]) or "__init__"

    members = {level: set() for level in FLOOR_NAMES}
    between, within = Counter(), Counter()
    for module in floors.MODULES:
        members[floors.floor(module)].add(group(module))
        for target in floors.imports(module):
            a, b = floors.floor(module), floors.floor(target)
            if a == b:
                within[a] += 1
            elif module != "tinyattn":  # the package's __init__ gathers everything: not drawn
                between[a, b] += 1
    lines = ["digraph floors {", "  rankdir=TB; nodesep=0.3; ranksep=0.5;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, margin="0.15,0.08"];',
             '  edge [fontname="Helvetica", fontsize=10, color="#5a6b85"];']
    for level in sorted(FLOOR_NAMES, reverse=True):
        names = html.escape(", ".join(sorted(members[level])))
        wrapped = "<br/>".join(textwrap.wrap(names, 70))
        count = within[level]
        note = f"<br/><i>{count} import{'s' * (count != 1)} within the floor</i>" if count else ""
        lines.append(f'  floor{level} [fillcolor="{_floor_colour(level)}", label=<<b>floor {level}: '
                     f'{FLOOR_NAMES[level]}</b><br/>{wrapped}{note}>];')
    for (a, b), count in sorted(between.items(), reverse=True):
        upward = ', color="#c0392b", fontcolor="#c0392b", constraint=false' if b > a else ""
        width = 0.6 + min(count, 60) / 15
        lines.append(f'  floor{a} -> floor{b} [label=" {count}", penwidth={width:.2f}{upward}];')
    lines.append("}")
    return "\n".join(lines)


def _floor_colour(level):
    return ["#e3ecf7", "#dde8f6", "#e8f0fb", "#eaf5ea", "#fbf1e3", "#f3ecf8"][level - 1]


def floors_diagram(path):
    result = subprocess.run(["dot", "-Tsvg", "-o", str(path)], input=floors_dot(), text=True, capture_output=True)
    if result.returncode != 0:
        raise FigureError(f"dot could not draw the floors: {result.stderr.strip()}")


def benchmark_rows(table):
    """(label, ratio) for each row of the benchmark's Markdown table that has a ratio."""
    rows, header = [], None
    for line in table.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        row = dict(zip(header, cells))
        ratio = row.get("tinyattn ÷ PyTorch", "")
        if re.fullmatch(r"[0-9.]+", ratio):
            rows.append((f"{row['case']} {row['size']} {row['pass']}", float(ratio)))
    if not rows:
        raise FigureError(f"{table} holds no row with a tinyattn ÷ PyTorch ratio")
    return rows


def benchmark_chart(table, path):
    """A horizontal bar per row of the table: tinyattn's time ÷ PyTorch's, with a line at 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = benchmark_rows(table)
    labels, ratios = [label for label, _ in rows], [ratio for _, ratio in rows]
    figure, axes = plt.subplots(figsize=(7.5, 0.26 * len(rows) + 1.2))
    colours = ["#4a7fb5" if ratio <= 1 else "#d9823b" for ratio in ratios]
    y = range(len(rows))
    axes.barh(y, ratios, color=colours, height=0.7)
    axes.axvline(1.0, color="#222222", linewidth=1)
    for i, ratio in enumerate(ratios):
        axes.text(ratio + 0.03, i, f"{ratio:.2f}", va="center", fontsize=8)
    axes.set_yticks(list(y), labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(0, max(ratios) * 1.12)
    axes.set_xlabel("tinyattn's time ÷ PyTorch's (left of the line: tinyattn is faster)")
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def build(out=OUT, force=False, log=print):
    """Make every picture into ``out`` unless the inputs are those of the pictures already there."""
    need_dot()
    stamp, digest = out / ".inputs", inputs_hash()
    if not force and stamp.is_file() and stamp.read_text() == digest:
        log(f"figures: nothing changed, keeping {out}")
        return
    out.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = {name: pool.submit(run_example, name, out) for name in EXAMPLES}
        attention_graph(out / "graph_attention.svg")
        floors_diagram(out / "floors.svg")
        benchmark_chart(ROOT / "docs" / "performance_table.md", out / "benchmark.svg")
        times = {name: run.result() for name, run in runs.items()}
    log("figures: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in times.items())
        + f"; all in {time.perf_counter() - start:.0f} s")
    stamp.write_text(digest)


def on_pre_build(config, **kwargs):
    """mkdocs hook: the pictures before the pages that show them."""
    import logging

    from mkdocs.exceptions import PluginError

    try:
        build(Path(config["docs_dir"]) / "figures", log=logging.getLogger("mkdocs.hooks.figures").info)
    except FigureError as error:
        raise PluginError(f"the documentation's pictures: {error}") from error


# A doctest directive as Pygments colours it: `# doctest: +ELLIPSIS` after an example's code, for the test run alone.
DOCTEST_DIRECTIVE = re.compile(r'[ \t]*<span class="c1">#\s*doctest:[^<]*</span>')


def on_page_content(html, page, **kwargs):
    """mkdocs hook: an ``<iframe src="figures/…">`` made relative to where the page is served, and the doctest
    directives of the code blocks left out of the page (the test run reads them from the Markdown)."""
    from mkdocs.utils import get_relative_url

    html = re.sub(r'(<iframe[^>]*\ssrc=")(figures/[^"]+)"',
                  lambda m: f'{m.group(1)}{get_relative_url(m.group(2), page.url)}"', html)
    return DOCTEST_DIRECTIVE.sub("", html)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--force", action="store_true", help="make them even when nothing changed")
    args = parser.parse_args()
    try:
        build(args.out, force=args.force)
    except FigureError as error:
        sys.exit(f"figures: {error}")
