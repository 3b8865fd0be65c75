"""``python -m bench train``: one training step (forward, loss, backward, optimizer step)
of PyTorch-style code, symgrad eager and compiled (the whole step under ``symgrad.compile``)
against torch eager (one thread and all threads) and jax.jit (the peers present on the
machine), per workload:

* ``mlp-adam`` (:mod:`bench.train_mlp`): an MLP 784-256-10 with Adam;
* ``cnn-sgd`` (:mod:`bench.train_cnn`): a small CNN (two Conv2d - BatchNorm2d - ReLU -
  MaxPool2d blocks, Linear) on 28x28 images with momentum SGD.

Each system starts from the same weights and data; the final loss after the timed steps
is printed (same updates: equal within float32 rounding). "first step" includes making
the model; "2nd step" is where symgrad-compiled compiles (its first step, which creates
the optimizer state, runs uncompiled).

Example::

    python -m bench train --steps 200 --workloads cnn-sgd
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench import train_cnn, train_mlp

__all__ = ["main", "WORKLOADS"]

WORKLOADS = {"mlp-adam": train_mlp, "cnn-sgd": train_cnn}


def measure(make, steps: int, repeats: int) -> dict:
    t0 = time.perf_counter()
    step = make()
    loss = step()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    step()                    # (symgrad-compiled compiles here: its first step made state)
    second = time.perf_counter() - t0
    for _ in range(4):
        step()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            loss = step()
        times.append((time.perf_counter() - t) / steps)
    return {"median": statistics.median(times), "min": min(times), "first": first,
            "second": second, "loss": float(loss.detach() if hasattr(loss, "detach") else loss)}


def report(name: str, title: str, rows: dict) -> None:
    best = min(r["median"] for r in rows.values())
    ref = rows.get("symgrad-eager")
    print(f"== {name}: {title}; time per training step")
    print(f"{'system':<16} {'median':>10} {'min':>10} {'first step':>11} {'2nd step':>10} "
          f"{'/best':>7} {'symgrad /':>10}  final loss")
    for system, r in rows.items():
        rel = f"{ref['median'] / r['median']:.2f}x" if ref else "-"
        print(f"{system:<16} {r['median'] * 1e6:>8.0f}us {r['min'] * 1e6:>8.0f}us "
              f"{r['first'] * 1e3:>9.1f}ms {r['second'] * 1e3:>8.1f}ms "
              f"{r['median'] / best:>6.2f}x {rel:>10}  {r['loss']:.6f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench train", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100, help="steps per timed sample")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma list of {', '.join(WORKLOADS)}")
    p.add_argument("--systems", default=",".join(train_mlp.SYSTEMS))
    a = p.parse_args(argv)
    names = a.workloads.split(",")
    bad = [n for n in names if n not in WORKLOADS]
    if bad:
        p.error(f"unknown workload {bad}; choose from {list(WORKLOADS)}")
    done = 0
    for name in names:
        workload, rows = WORKLOADS[name], {}
        for system in a.systems.split(","):
            try:
                rows[system] = measure(workload.SYSTEMS[system], a.steps, a.repeats)
            except ImportError as e:
                print(f"  [{system}] skipped: {e}", file=sys.stderr)
        if rows:
            report(name, workload.TITLE, rows)
            done += 1
    return 0 if done else 1


if __name__ == "__main__":
    raise SystemExit(main())
