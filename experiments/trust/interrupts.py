"""Ctrl-C at random times during ``steinax.sample`` (issue 56): every one raises a ``KeyboardInterrupt`` subclass
carrying a partial result, and no process dies of a signal.

    python experiments/trust/interrupts.py [--times 20] [--seed 0] [--workers 2] [--out DIR]

The run: ``steinax.sample`` on the banana (``steinax.posteriors.closed_form.banana``, float64, 100 particles, its
defaults), each in a fresh process (compilation included, where the earlier crashes were: SIGSEGV and LLVM aborts
after a ``KeyboardInterrupt`` raised inside XLA's compiler). One uninterrupted run first measures each stage's
seconds; then ``--times`` SIGINTs are sent at times drawn uniformly (stratified) over 90% of that run, each to its own
process, counted from the moment the process is about to call ``sample``. Each process reports what it got: the
exception's type, the stage and place it names, the partial result's ``ok``, its draws' shape and message. The rule
checked: every process ends with exit status 0 (no signal), having caught a
:class:`~steinax.pipeline.SampleInterrupted` whose result has ``ok=False`` and finite draws of the right shape.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

CHILD = r"""
import json, sys, time, warnings
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import steinax
from steinax.pipeline import SampleInterrupted
from steinax.posteriors.closed_form import banana

target = banana()
init = jax.random.normal(jax.random.key(1), (100, 2), np.float64)
warnings.simplefilter("ignore")
print("READY", flush=True)
t0 = time.perf_counter()
try:
    res = steinax.sample(target, rng_key=jax.random.key(0), init=init, progress=False)
    out = {"kind": "completed", "ok": bool(res.ok), "seconds": res.seconds}
except SampleInterrupted as err:
    r = err.result
    out = {"kind": "SampleInterrupted", "stage": err.stage, "where": err.where, "ok": bool(r.ok),
           "draws": list(r.draws.shape), "finite": bool(np.all(np.isfinite(r.draws))), "message": r.message,
           "stages": list(r.stages), "evaluations": r.gradient_evaluations.get("total")}
except KeyboardInterrupt as err:
    out = {"kind": type(err).__name__, "message": str(err)}
out["elapsed"] = time.perf_counter() - t0
print("RESULT " + json.dumps(out), flush=True)
"""


def _child(delay: float | None, timeout: float = 600.0) -> dict:
    """One process: SIGINT ``delay`` seconds after it reports ready (``None``: never); what it printed and its exit."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        return {"kind": "no start", "returncode": proc.wait(), "stderr": proc.stderr.read()[-2000:]}
    if delay is not None:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    result = next((json.loads(s[7:]) for s in out.splitlines() if s.startswith("RESULT ")), {"kind": "no result"})
    result.update(returncode=proc.returncode, delay=delay)
    if proc.returncode != 0:
        result["stderr"] = err[-2000:]
    return result


def passed(row: dict) -> bool:
    """The rule of the module docstring, for one process."""
    return (row.get("returncode") == 0 and row.get("kind") == "SampleInterrupted" and row.get("ok") is False
            and row.get("finite") is True and row.get("draws", [0, 0])[1] == 2)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--times", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    banner("Ctrl-C during steinax.sample", {"times": a.times, "seed": a.seed, "workers": a.workers,
                                           "run": "banana, float64, 100 particles, a fresh process each"})
    full = _child(None)
    if full.get("kind") != "completed":
        print(f"the uninterrupted run failed: {full}")
        return 1
    seconds = full["seconds"]
    total = full["elapsed"]
    bounds = np.cumsum([seconds.get(s, 0.0) for s in ("warm_start", "particles", "checks", "correction")])
    print(f"uninterrupted: {total:.1f} s; stages end at {np.round(bounds, 1).tolist()} s "
          "(warm start, particles, checks, correction)", flush=True)
    rng = np.random.default_rng(a.seed)
    delays = (np.arange(a.times) + rng.uniform(size=a.times)) / a.times * 0.9 * total
    with ThreadPoolExecutor(max_workers=a.workers) as pool:
        rows = list(pool.map(_child, delays))
    good = 0
    for row in rows:
        good += passed(row)
        print(f"SIGINT at {row['delay']:5.1f} s: {row.get('kind')}, exit {row.get('returncode')}, stage "
              f"{row.get('stage')!s:10s} {row.get('where', '')!s:45.45s} ok={row.get('ok')} draws {row.get('draws')}"
              + ("" if passed(row) else f"  FAILED {row.get('message', '')} {row.get('stderr', '')[-300:]}"), flush=True)
    stages = sorted({row.get("stage") for row in rows if row.get("stage")})
    print(f"{good} of {len(rows)} raised SampleInterrupted with a partial result and exited normally; stages hit: "
          f"{stages}")
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "interrupts.csv"),
                         [{k: row.get(k) for k in ("delay", "kind", "returncode", "stage", "where", "ok", "draws")}
                          for row in rows])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 2.5))
    names = ["arguments", "warm_start", "particles", "checks", "correction", "final"]
    ax.scatter([row["delay"] for row in rows], [names.index(row["stage"]) if row.get("stage") in names else -1
                                                for row in rows],
               c=["tab:green" if passed(row) else "tab:red" for row in rows])
    for end in bounds:
        ax.axvline(end, color="k", lw=0.5)
    ax.set_yticks(range(-1, len(names)), ["(no result)"] + names, fontsize=7)
    ax.set_xlabel("SIGINT after (s); lines: where each stage ended in the uninterrupted run")
    save_figure(fig, os.path.join(a.out, "interrupts.png"))
    return 0 if good == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
