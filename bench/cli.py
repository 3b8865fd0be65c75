"""Command line of ``python -m bench``: parse options into a harness Config.

Example:
    >>> parse_args(["--quick", "--only", "seed,rosenbrock", "--only", "mlp"]).only
    ['seed', 'rosenbrock', 'mlp']
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.harness import RESULTS, Config, run
from bench.systems import all_systems
from bench.workloads import FAMILIES, all_workloads


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for arg in values or [] for v in arg.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark value+gradient of symgrad against its peers.")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and short samples (< 60 s)")
    p.add_argument("--only", action="append", metavar="WORKLOAD",
                   help="workload family or full name; repeatable or comma list")
    p.add_argument("--systems", action="append", metavar="SYSTEM",
                   help="system name or prefix (e.g. torch, casadi-mx); repeatable or comma list")
    p.add_argument("--json", type=Path, default=RESULTS / "latest.json", metavar="PATH",
                   help="where to write results JSON (default: %(default)s)")
    p.add_argument("--plot", type=Path, default=RESULTS / "latest.png", metavar="PATH",
                   help="where to write the PNG chart (default: %(default)s)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the chart")
    p.add_argument("--list", action="store_true", help="list workloads and systems, then exit")
    return p


def parse_args(argv: list[str] | None = None) -> Config:
    p = build_parser()
    a = p.parse_args(argv)
    only, systems = _split(a.only), _split(a.systems)
    _validate(p, only, systems, a.quick)
    if a.list:
        _print_list(a.quick)
        raise SystemExit(0)
    return Config(quick=a.quick, only=only, systems=systems, json_path=a.json,
                  plot_path=None if a.no_plot else a.plot)


def _validate(p: argparse.ArgumentParser, only: list[str], systems: list[str],
              quick: bool) -> None:
    names = set(FAMILIES) | {w.name for w in all_workloads(quick)}
    bad = [o for o in only if o not in names]
    if bad:
        p.error(f"unknown workload {bad}; choose from {sorted(names)}")
    sys_names = [s.name for s in all_systems()]
    bad = [s for s in systems if not any(n.startswith(s) for n in sys_names)]
    if bad:
        p.error(f"unknown system {bad}; choose from {sys_names}")


def _print_list(quick: bool) -> None:
    print("workloads:")
    for w in all_workloads(quick):
        print(f"  {w.name:24} {w.describe()}")
    print("systems:")
    for s in all_systems():
        print(f"  {s.name:24} threads {s.threads}; {s.note}")


def main(argv: list[str] | None = None) -> int:
    import sys
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["compile"]:           # python -m bench compile ...: first-call times
        from bench.compile import main as compile_main
        return compile_main(args[1:])
    if args[:1] == ["eager"]:             # python -m bench eager ...: eager op costs vs torch
        from bench.eager import main as eager_main
        return eager_main(args[1:])
    if args[:1] == ["train"]:             # python -m bench train ...: training steps
        from bench.train import main as train_main
        return train_main(args[1:])
    run(parse_args(args))
    return 0
