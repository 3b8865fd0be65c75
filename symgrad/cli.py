"""The command line: ``python -m symgrad inspect FILE.py:FUNC --arg f64[3,4] --stage ...``
prints one stage of compiling FUNC for the given argument types: the traced graph, the
fused formulas, the symbolic derivative, LLVM IR before / after optimisation, assembly --
for this machine or any other LLVM supports (``--target aarch64-unknown-linux-gnu:neoverse-n1``)."""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys

import numpy as np

from .graph import dtypes

__all__ = ["main", "parse_arg_type"]

STAGES = ("graph", "graph-raw", "formulas", "symbolic", "dot", "llvm", "llvm-opt", "asm")
TRANSFORMS = ("compile", "grad", "value_and_grad", "jacobian", "hessian")
_ALIASES = {"f64": "float64", "f32": "float32", "i64": "int64", "i32": "int32", "bool": "bool"}


def parse_arg_type(text: str) -> np.ndarray:
    """``f64[3,4]`` → a float64 array of shape (3, 4) (values do not matter to tracing)."""
    m = re.fullmatch(r"\s*([a-z0-9]+)\[([0-9,\s]*)\]\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad --arg {text!r}: expected like f64[3,4] or f32[]")
    name = _ALIASES.get(m.group(1), m.group(1))
    try:
        dt = dtypes.as_dtype(name)
    except TypeError:
        raise argparse.ArgumentTypeError(f"unknown dtype {m.group(1)!r} in --arg {text!r}") from None
    shape = tuple(int(s) for s in m.group(2).replace(" ", "").split(",") if s)
    return np.ones(shape, dtype=dt.np) * (0.5 if dt.is_floating_point else 1)


def _load(target: str):
    path, _, func = target.rpartition(":")
    if not path or not func:
        raise SystemExit(f"error: expected FILE.py:FUNC, got {target!r}")
    spec = importlib.util.spec_from_file_location("_symgrad_inspected", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: cannot load {path!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return getattr(module, func)
    except AttributeError:
        raise SystemExit(f"error: {path} has no function {func!r}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symgrad")
    sub = p.add_subparsers(dest="command", required=True)
    ins = sub.add_parser("inspect", help="print one compilation stage of a function")
    ins.add_argument("target", help="FILE.py:FUNC")
    ins.add_argument("--arg", action="append", type=parse_arg_type, default=[],
                     help="an argument type such as f64[3,4] (repeat per argument)")
    ins.add_argument("--stage", choices=STAGES, default="graph")
    ins.add_argument("--transform", choices=TRANSFORMS, default="compile")
    ins.add_argument("--backend", choices=("llvm", "numpy"), default=None)
    ins.add_argument("--target", dest="machine", default=None,
                     help="the machine to build for: a CPU (x86-64-v3) or TRIPLE[:CPU[:FEATURES]] "
                          "(default: this host)")
    ins.add_argument("--simplify", action="store_true",
                     help="simplify symbolic formulas with sympy (slow for large programs)")
    args = p.parse_args(argv)
    from . import compiler   # late: `--help` answers without loading the compiler
    fn = _load(args.target)
    if hasattr(fn, "fn") and isinstance(fn, compiler.Compiled):
        fn = fn.fn
    try:
        compiled = getattr(compiler, args.transform)(fn, backend=args.backend, target=args.machine)
    except ValueError as e:                 # an unknown triple, CPU or feature
        raise SystemExit(f"error: {e}") from None
    lowered = compiled.lower(*args.arg)
    stage = args.stage
    if stage == "graph":
        out = lowered.as_text()
    elif stage == "graph-raw":
        out = lowered.as_text(optimized=False)
    elif stage == "formulas":
        out = "\n".join(f"{k}: {v}" for k, v in lowered.formulas().items()) or "(no fused kernels)"
    elif stage == "symbolic":
        out = str(lowered.symbolic(simplify=args.simplify))
    elif stage == "dot":
        out = lowered.dot()
    else:
        if lowered.backend != "llvm":
            raise SystemExit(f"error: stage {stage!r} needs the llvm backend")
        out = lowered.compile().as_text(stage)
    sys.stdout.write(out.rstrip("\n") + "\n")
    return 0
