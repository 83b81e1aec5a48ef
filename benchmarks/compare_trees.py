"""``benchmarks/run.py`` on two checkouts of tinyattn, alternated, with a control: did a change move the speed?

    python benchmarks/compare_trees.py BEFORE AFTER                 # five runs of each, every default case
    python benchmarks/compare_trees.py BEFORE AFTER --runs 5 --cases mha,encoder --markdown out/compare.md
    python benchmarks/compare_trees.py BEFORE AFTER --after-args=--keep-freed-memory   # AFTER's run.py takes these

``BEFORE`` and ``AFTER`` are two checkouts (``git worktree add /tmp/before <commit>``). Each run is that tree's own
``benchmarks/run.py --cases CASE --json …`` in a fresh process with ``PYTHONPATH`` set to the tree, so each
library is timed by its own benchmark, beside the same PyTorch. Both time the fused forms: a tree from before
``ta.compile`` runs them by default (its fast paths were on unless switched off), a tree from after compiles its
models and functions in its own ``run.py``, so no tree's library is asked for a name it lacks. The runs go case by
case: for each case, ``--runs`` rounds, and in each round ``BEFORE``, ``AFTER`` and the control (``BEFORE`` again),
the order turned around every other round, so the three see the machine in the same state. The control is the
answer to "how much does this machine move a row when nothing changed?": a row of ``AFTER`` is only read as slower
when its ratio moved beyond what the control's moved.

Each row of the table: the median (and the spread) over the runs of tinyattn ÷ PyTorch for each tree, and
``after ÷ before`` and ``control ÷ before`` of those medians. Rows of ``after ÷ before`` above ``--bar`` (1.03: 3%
slower) are marked, and so are the control's, which changed nothing.

``--after-args`` passes options to ``AFTER``'s ``run.py`` alone: ``--keep-freed-memory``, say, when ``BEFORE`` is a
version that set glibc's ``malloc`` for the whole process at import, PyTorch included, and ``AFTER`` leaves it as an
opt-in; both then time their libraries beside a PyTorch under the same ``malloc``.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

DEFAULT_CASES = ("sdpa", "mha", "encoder", "bert_layer", "bert6", "train")


def run_once(tree, case, json_path, extra=()):
    """One run of ``tree``'s ``benchmarks/run.py --cases case`` in a fresh process; its rows (``run.py --json``'s)."""
    environment = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    command = [sys.executable, os.path.join("benchmarks", "run.py"), "--cases", case, "--json", json_path, *extra]
    subprocess.run(command, cwd=tree, env=environment, check=True, stdout=subprocess.DEVNULL)
    with open(json_path) as f:
        return [row for row in json.load(f) if row.get("ratio") is not None]


def schedule(cases, runs):
    """``[(case, round, variant), …]`` in the order they run: case by case, the three variants in each round,
    reversed every other round."""
    order = []
    for case in cases:
        for number in range(runs):
            variants = ("before", "after", "control")
            order += [(case, number, variant) for variant in (variants if number % 2 == 0 else variants[::-1])]
    return order


def summarize(rows_by_variant, bar=1.03):
    """``{variant: [rows of each run], …}`` (``before``, ``after``, optionally ``control``) -> the table's rows:
    ``{"key": (case, size, pass), "before": (median, low, high), "after": …, "control": …, "after_over_before",
    "control_over_before", "over": bool, "control_over": bool}``, in the order of ``before``'s first run."""
    ratios = {}
    for variant, runs in rows_by_variant.items():
        for rows in runs:
            for row in rows:
                key = (row["case"], row["size"], row["pass"])
                ratios.setdefault(key, {}).setdefault(variant, []).append(row["ratio"])
    table = []
    for key, by_variant in ratios.items():
        if "before" not in by_variant or "after" not in by_variant:
            continue
        entry = {"key": key}
        for variant, values in by_variant.items():
            entry[variant] = (statistics.median(values), min(values), max(values))
        entry["after_over_before"] = entry["after"][0] / entry["before"][0]
        entry["over"] = entry["after_over_before"] > bar
        if "control" in entry:
            entry["control_over_before"] = entry["control"][0] / entry["before"][0]
            entry["control_over"] = entry["control_over_before"] > bar
        table.append(entry)
    return table


def markdown(table, bar=1.03):
    """The table as Markdown, with a closing line that counts the rows over ``bar``."""
    control = all("control" in entry for entry in table)

    def cell(values):
        return f"{values[0]:.3f} ({values[1]:.2f}–{values[2]:.2f})"

    head = "| case | size | pass | before | after | after ÷ before |"
    rule = "|---|---|---|---|---|---|"
    if control:
        head, rule = head + " control (before again) | control ÷ before |", rule + "---|---|"
    lines = [head, rule]
    for entry in table:
        line = (f"| {' | '.join(entry['key'])} | {cell(entry['before'])} | {cell(entry['after'])} | "
                f"{entry['after_over_before']:.3f}{' ✗' if entry['over'] else ''} |")
        if control:
            line += (f" {cell(entry['control'])} | {entry['control_over_before']:.3f}"
                     f"{' ✗' if entry['control_over'] else ''} |")
        lines.append(line)
    summary = f"after ÷ before over {bar:g}: {sum(e['over'] for e in table)} of {len(table)} rows"
    if control:
        summary += f"; control ÷ before over {bar:g}: {sum(e['control_over'] for e in table)} of {len(table)}"
    return "\n".join(lines) + "\n\n" + summary + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="the checkout before the change")
    parser.add_argument("after", help="the checkout after it")
    parser.add_argument("--runs", type=int, default=5, help="runs of each tree per case (default 5)")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES), help="run.py's cases, comma-separated")
    parser.add_argument("--no-control", action="store_true", help="leave out the control (before against itself)")
    parser.add_argument("--after-args", default="", help="options for AFTER's run.py alone (--after-args=--keep-…)")
    parser.add_argument("--bar", type=float, default=1.03, help="after ÷ before above this is marked (default 1.03)")
    parser.add_argument("--json", help="write every run's rows here, by variant")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table here")
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after, "control": args.before}
    runs = {variant: {} for variant in trees if variant != "control" or not args.no_control}
    with tempfile.TemporaryDirectory() as scratch:
        for case, number, variant in schedule(args.cases.split(","), args.runs):
            if variant not in runs:
                continue
            extra = shlex.split(args.after_args) if variant == "after" else ()
            rows = run_once(trees[variant], case, os.path.join(scratch, f"{variant}.json"), extra)
            runs[variant].setdefault(number, []).extend(rows)
            print(f"{case} round {number + 1} {variant}: " + ", ".join(
                f"{row['size']} {row['pass']} {row['ratio']:.3f}" for row in rows), flush=True)
    by_variant = {variant: [rounds[n] for n in sorted(rounds)] for variant, rounds in runs.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(by_variant, f, indent=1)
    table = markdown(summarize(by_variant, args.bar), args.bar)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            command = f"python benchmarks/compare_trees.py {args.before} {args.after} --runs {args.runs}"
            if args.after_args:
                command += f" --after-args={shlex.quote(args.after_args)}"
            f.write(f"`{command}`\n\n" + table)


if __name__ == "__main__":
    main()
