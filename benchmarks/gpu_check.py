"""The GPU check: one command that shows whether tinyattn works, and how fast, on a CUDA machine.

    pip install -e '.[test,examples,cuda]'       # CuPy for the GPU, PyTorch with CUDA to compare against
    python benchmarks/gpu_check.py               # about eight minutes at most; the summary also in out/gpu_check/

Steps, each with its own time limit, all within one overall budget (``--budget``, 480 s):

1. environment: the GPU, CUDA, CuPy, PyTorch, NumPy and Python versions, and one CuPy kernel
   compiled and run. Without CuPy or a GPU the check stops here: "no GPU: nothing to check".
2. tests: ``python -m pytest -m cuda -v``, the ``cuda`` parametrisations of the ``device`` fixture
   across the suite (tinyattn on CuPy), with the passed/failed counts; spread over 8 processes
   where pytest-xdist is installed, under the ``gpu`` hypothesis profile (few examples).
3. examples: every script under ``examples/`` whose ``--help`` offers ``--quick`` and
   ``--device``, run with ``--device cuda --quick`` (side by side), and the metric of its last
   line, ``final <metric>: <value>``; each compiles its model (``ta.compile``), so the fused
   forms run on the GPU.
4. benchmark: the encoder layer at the medium and large sizes, compiled (``ta.compile``), tinyattn
   on CuPy against PyTorch on CUDA (``benchmarks/run.py --device cuda``), each timed call between
   synchronisations.

The summary table is printed and written to ``OUT/gpu_check.json``; each step's full output is
in ``OUT/logs/``. Exit status: 0 when every step passed, 1 when one failed, 3 when there is no
GPU to check (2 is argparse's, for a wrong option).
"""

import argparse
import concurrent.futures
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("tests", "examples", "bench")
TIMEOUTS = {"tests": 300, "example": 75, "bench": 100}  # seconds, each also capped by what is left of --budget
FINAL_LINE = re.compile(r"final (?P<metric>.+?): (?P<value>\S+)")


class NoGPU(Exception):
    """CuPy is missing or cannot reach a GPU: there is nothing to check."""


# ----------------------------------------------------------------------------- running a step


def child_environment(**extra):
    """This process's environment with the repository first on ``PYTHONPATH``, so that every script imports this
    checkout's tinyattn whether or not it is installed (a script's own folder, not the root, heads ``sys.path``)."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_command(command, timeout, log_path, env=None):
    """Run ``command`` from the repository root with a time limit; ``(returncode or None on timeout, seconds, output)``.

    The command gets its own process group, so that a timeout ends its children too. Its
    combined stdout and stderr go to ``log_path`` as well.
    """
    env = child_environment() if env is None else env
    start = time.monotonic()
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env, start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=max(timeout, 1))
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        returncode = None
    seconds = time.monotonic() - start
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text(f"$ {' '.join(map(str, command))}\n{output}")
    return returncode, seconds, output


def _tail(output, lines=15):
    return "\n".join("    " + line for line in output.strip().splitlines()[-lines:])


class Budget:
    """The seconds left of the whole check; each step's limit is its own or what is left, the smaller."""

    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds

    def limit(self, own):
        return max(0.0, min(own, self.deadline - time.monotonic()))


# ----------------------------------------------------------------------------- 1. environment


def environment():
    """Versions of everything that matters, after one CuPy kernel has compiled and run; raises ``NoGPU``."""
    info = {"python": platform.python_version(), "platform": platform.platform()}
    try:
        import cupy
    except ImportError as error:
        raise NoGPU(f"CuPy is not installed ({error}); on a CUDA 12 machine: pip install 'tinyattn[cuda]'") from error
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDA's own error type when there is no driver or no device
        raise NoGPU(f"CuPy {cupy.__version__} cannot reach a GPU: {type(error).__name__}: {error}") from error
    if count == 0:
        raise NoGPU(f"CuPy {cupy.__version__} sees no GPU")
    properties = cupy.cuda.runtime.getDeviceProperties(0)
    free, total = cupy.cuda.Device(0).mem_info
    runtime, driver = cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.runtime.driverGetVersion()
    info.update(
        gpu=properties["name"].decode() if isinstance(properties["name"], bytes) else str(properties["name"]),
        gpu_count=count,
        compute_capability=f"{properties['major']}.{properties['minor']}",
        gpu_memory_gib=round(total / 2**30, 1),
        gpu_memory_free_gib=round(free / 2**30, 1),
        cuda_runtime=f"{runtime // 1000}.{runtime % 1000 // 10}",
        cuda_driver=f"{driver // 1000}.{driver % 1000 // 10}",
        cupy=cupy.__version__,
    )
    try:
        result = int((cupy.arange(4) * 2).sum())  # compiles an elementwise and a reduction kernel
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
        raise NoGPU(f"CuPy {cupy.__version__} cannot compile or run a kernel: {reason}") from error
    if result != 12:
        raise NoGPU(f"CuPy computed 2·(0+1+2+3) = {result} on the GPU, expected 12")
    import numpy

    info["numpy"] = numpy.__version__
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda if torch.cuda.is_available() else "not available"
    except ImportError:
        info["torch"] = "not installed"
    return info


# ----------------------------------------------------------------------------- 2. tests


def pytest_counts(output):
    """``{"passed": n, "failed": n, ...}`` from pytest's last summary line (``3 passed, 1 failed in 2.0s``)."""
    summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error|skipped|deselected)", line)]
    counts = {}
    if summary:
        for number, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed)",
                                       summary[-1]):
            counts["errors" if word.startswith("error") else word] = int(number)
    return counts


def _workers():
    """pytest-xdist's ``-n`` options where it is installed (compiling CuPy's kernels is CPU work), else none."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        return []
    return ["-n", str(min(8, os.cpu_count() or 1))]


def check_tests(out, budget, marker="cuda"):
    # -v names each test as it ends, so a timed-out run's log still says which ones failed; the "gpu"
    # hypothesis profile (tests/conftest.py) draws few examples and does not shrink a failure
    command = [sys.executable, "-m", "pytest", "-m", marker, "-v", "--tb=short", "-rf", "-p", "no:cacheprovider",
               *_workers()]
    returncode, seconds, output = run_command(command, budget.limit(TIMEOUTS["tests"]), out / "logs" / "pytest.log",
                                              env=child_environment(TINYATTN_PROFILE="gpu"))
    counts = pytest_counts(output)
    passed, failed = counts.get("passed", 0), counts.get("failed", 0) + counts.get("errors", 0)
    ok = returncode == 0 and passed > 0 and failed == 0
    if returncode is None:
        detail = f"timed out after {seconds:.0f} s"
    else:
        detail = ", ".join(f"{n} {word}" for word, n in counts.items() if word != "deselected") or "no summary line"
    step = {"step": f"pytest -m {marker}", "ok": ok, "seconds": round(seconds, 1), "detail": detail,
            "passed": passed, "failed": failed, "counts": counts}
    if not ok:
        step["tail"] = _tail(output, 30)
    return [step]


# ----------------------------------------------------------------------------- 3. examples


def _flags(script):
    """The options a script's ``--help`` lists."""
    try:
        result = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60, env=child_environment())
    except subprocess.TimeoutExpired:
        return set()
    return set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", result.stdout)) if result.returncode == 0 else set()


def final_metric(output):
    """``(metric, value)`` from the last line, ``final <metric>: <value>``; ``None`` if it reads otherwise."""
    lines = output.strip().splitlines()
    match = FINAL_LINE.fullmatch(lines[-1].strip()) if lines else None
    if not match:
        return None
    try:
        return match["metric"], float(match["value"])
    except ValueError:
        return None


def run_example(script, out, budget, device):
    flags = _flags(script)
    name = f"example {script.name}"
    if not {"--quick", "--device"} <= flags:
        return None  # not a quick, device-aware example: nothing to run
    command = [sys.executable, str(script), "--device", device, "--quick"]
    if "--out" in flags:
        command += ["--out", str(out / "examples" / script.stem)]
    returncode, seconds, output = run_command(command, budget.limit(TIMEOUTS["example"]),
                                              out / "logs" / f"{script.stem}.log")
    metric = final_metric(output) if returncode == 0 else None
    step = {"step": name, "seconds": round(seconds, 1)}
    if returncode is None:
        step.update(ok=False, detail=f"timed out after {seconds:.0f} s")
    elif returncode != 0:
        step.update(ok=False, detail=f"exit status {returncode}")
    elif metric is None:
        step.update(ok=False, detail="its last line is not 'final <metric>: <value>'")
    else:
        step.update(ok=math.isfinite(metric[1]), detail=f"final {metric[0]}: {metric[1]:g}",
                    metric=metric[0], value=metric[1])
    if not step["ok"]:
        step["tail"] = _tail(output)
    return step


def check_examples(out, budget, device="cuda"):
    scripts = sorted((ROOT / "examples").glob("*.py"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(scripts) or 1) as pool:
        steps = list(pool.map(lambda script: run_example(script, out, budget, device), scripts))
    steps = [step for step in steps if step is not None]
    if not steps:
        return [{"step": "examples", "ok": False, "seconds": 0.0,
                 "detail": "no script under examples/ offers both --quick and --device"}]
    return steps


# ----------------------------------------------------------------------------- 4. benchmark


def check_benchmark(out, budget, device="cuda", sizes="medium,large"):
    path = out / f"bench_encoder_{device}.json"
    if path.exists():
        path.unlink()
    command = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--device", device, "--cases", "encoder",
               "--sizes", sizes, "--json", str(path)]
    returncode, seconds, output = run_command(command, budget.limit(TIMEOUTS["bench"]), out / "logs" / "bench.log")
    if returncode != 0 or not path.exists():
        reason = f"timed out after {seconds:.0f} s" if returncode is None else f"exit status {returncode}"
        return [{"step": f"bench encoder {sizes}", "ok": False, "seconds": round(seconds, 1), "detail": reason,
                 "tail": _tail(output)}]
    steps = []
    for row in json.loads(path.read_text()):
        steps.append({
            "step": f"bench encoder {row['size']} {row['pass']}", "ok": True, "seconds": None,
            "detail": f"tinyattn {row['tinyattn_ms']:.2f} ms, pytorch {row['pytorch_ms']:.2f} ms, "
                      f"ratio {row['ratio']:.2f}",
            **{key: row[key] for key in ("size", "pass", "tinyattn_ms", "pytorch_ms", "ratio")},
        })
    steps[0]["seconds"] = round(seconds, 1)
    return steps


# ----------------------------------------------------------------------------- the summary


def print_table(steps):
    width = max(len(step["step"]) for step in steps) + 2
    print(f"\n{'step':<{width}}{'status':<8}{'seconds':>8}  detail")
    print("-" * (width + 60))
    for step in steps:
        seconds = "" if step.get("seconds") is None else f"{step['seconds']:.1f}"
        print(f"{step['step']:<{width}}{'ok' if step['ok'] else 'FAILED':<8}{seconds:>8}  {step['detail']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "out" / "gpu_check"),
                        help="folder for gpu_check.json, the logs and the examples' pictures (default: out/gpu_check)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"which steps to run after the environment check, comma-separated (default: all: "
                             f"{','.join(STEPS)})")
    parser.add_argument("--budget", type=float, default=480.0,
                        help="seconds for all the steps together; each step's own limit is cut to what is left")
    args = parser.parse_args(argv)
    steps_wanted = [s for s in args.steps.split(",") if s]
    unknown = set(steps_wanted) - set(STEPS)
    if unknown:
        parser.error(f"unknown step(s) {sorted(unknown)}: choose from {', '.join(STEPS)}")

    try:
        info = environment()
    except NoGPU as reason:
        print(f"no GPU: nothing to check ({reason})", file=sys.stderr)
        return 3
    print("environment:")
    for key, value in info.items():
        print(f"  {key:<20}{value}")

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget)
    checks = {"tests": check_tests, "examples": check_examples, "bench": check_benchmark}
    steps = []
    for name in steps_wanted:
        print(f"\n== {name} (logs in {out / 'logs'})", flush=True)
        results = checks[name](out, budget)
        for step in results:
            print(f"  {'ok    ' if step['ok'] else 'FAILED'} {step['step']}: {step['detail']}", flush=True)
            if not step["ok"] and step.get("tail"):
                print(step["tail"], flush=True)
        steps += results

    ok = all(step["ok"] for step in steps)
    print_table(steps)
    summary = {"ok": ok, "environment": info, "steps": [{k: v for k, v in s.items() if k != "tail"} for s in steps]}
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\n{'all steps passed' if ok else 'SOME STEPS FAILED'}; summary in {out / 'gpu_check.json'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
