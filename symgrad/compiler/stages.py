"""The stages after tracing, as in JAX: ``f.lower(*args)`` gives a :class:`Lowered`
(``as_text``, ``formulas``, ``symbolic``, ``dot``), ``.compile()`` the backend executable.
:func:`run_stages` is the pipeline itself: stabilise, transform (symbolic
differentiation), simplify, transposed products, fuse -- each timed by a
:class:`~symgrad.compiler.progress.StageClock`."""
from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np

from ..config import settings
from ..graph import pytree
from ..graph.node import toposort
from ..graph import formula as F
from ..graph.program import Program
from .backends import get_backend
from .fusion import fuse
from .loops import in_bodies, share_loops
from .progress import StageClock
from .rewrite import count_nodes, simplify, stabilize, transpose_products
from .transforms import Transform

__all__ = ["Lowered", "run_stages", "apply_transform", "rewrite", "optimize"]


def resolve_backend(name: str | None) -> str:
    name = name or settings.backend
    if name == "llvm":
        try:
            get_backend("llvm")
        except RuntimeError as e:
            warnings.warn(f"{e}; using the numpy backend", RuntimeWarning, stacklevel=3)
            return "numpy"
    else:
        get_backend(name)
    return name


class _Stages(namedtuple("_Stages", "raw stats optimized aux signature")):
    """What the stages after tracing make of a traced program."""


class Lowered:
    """A traced, transformed and optimised program for one input signature. The stages
    after tracing run when first needed (``stages`` is the function running them): a
    call answered from the disk cache never runs them, inspecting its program does.
    ``target``: the machine the LLVM backend builds for (a ``codegen.target.Target``)."""

    def __init__(self, stages, backend: str, signature: tuple | None = None, target=None,
                 clock: StageClock | None = None):
        self._make = stages
        self._clock = clock
        self._stages: _Stages | None = None
        self.backend = backend
        self.target = target
        self._signature = signature
        self._exe = None

    @classmethod
    def from_program(cls, program: Program, backend: str, signature: tuple, n_aux: int,
                     target=None) -> "Lowered":
        """A Lowered for an optimised ``program`` that came without its trace (in a
        pickle): it inspects and compiles as any other; its program before the rewrites
        is not kept (``raw`` is the optimised program too).  ``n_aux``: how many of the
        program's last inputs are placeholders fed zeros."""
        outs = program.outputs
        stats = {"traced": None, "transform": None, "transformed": None,
                 "optimized": count_nodes(outs),
                 "fused": sum(1 for n in toposort(outs) if n.op == "fused"), "times": {}}
        aux = list(program.inputs[len(program.inputs) - n_aux:]) if n_aux else []
        made = _Stages(program, stats, program, aux, signature)
        return cls(lambda: made, backend, signature=signature, target=target)

    def _get(self) -> _Stages:
        if self._stages is None:
            self._stages = self._make()
        return self._stages

    raw = property(lambda self: self._get().raw, doc="The program as transformed.")
    optimized = property(lambda self: self._get().optimized,
                         doc="The program after the rewrites and fusion.")
    stats = property(lambda self: self._get().stats,
                     doc="Node counts per stage; ``times``: seconds per compile stage.")
    aux = property(lambda self: self._get().aux, doc="Placeholder inputs fed zeros.")

    @property
    def signature(self) -> tuple:
        """(argument structure, leaf specs, output structure)."""
        return self._signature if self._signature is not None else self._get().signature

    def as_text(self, stage: str | bool = "graph", *, optimized: bool = True) -> str:
        """One stage as text: ``"graph"`` -- the program, one line per node, after the
        rewrites (``"graph-raw"`` or ``optimized=False``: before them), with node counts
        per stage; ``"llvm"`` / ``"llvm-opt"`` -- the LLVM IR as generated / optimised;
        ``"asm"`` -- the target's assembly (any target LLVM supports, runnable or not)."""
        if isinstance(stage, bool):           # as_text(False): the program before rewrites
            stage, optimized = "graph", stage
        if stage in ("llvm", "llvm-opt", "asm", "program"):
            if self.backend != "llvm":
                raise ValueError(f"stage {stage!r} needs the llvm backend (this is "
                                 f"{self.backend!r})")
            return self.compile().as_text(stage)
        if stage not in ("graph", "graph-raw"):
            raise ValueError(f"unknown stage {stage!r}; choose one of graph, graph-raw, "
                             f"llvm, llvm-opt, asm, program")
        optimized = optimized and stage == "graph"
        s = self.stats
        if s["traced"] is None:
            head = (f"# {s['optimized']} nodes after rewrites and fusion ({s['fused']} fused "
                    "kernels); the program came in a pickle, without its trace")
        else:
            head = (f"# {s['traced']} nodes traced, {s['transformed']} after "
                    f"{s['transform']}, {s['optimized']} after rewrites and fusion "
                    f"({s['fused']} fused kernels)")
        return head + "\n" + (self.optimized if optimized else self.raw).as_text()

    def formulas(self, latex: bool = False) -> dict[str, object]:
        """Each fused elementwise kernel as a sympy expression of its inputs (or LaTeX),
        as mathematics: converted from the kernel's own formula, which ``as_text`` shows
        in the order it is computed (sympy's evaluation may reorder or combine terms)."""
        import sympy                  # late: inspection only
        out = {}
        k = 0
        for n in self.optimized.nodes():
            if n.op != "fused":
                continue
            expr = F.to_sympy(n.attr("expr"))
            out[f"kernel{k}"] = sympy.latex(expr) if latex else expr
            k += 1
        return out

    def symbolic(self, simplify: bool = True):
        """Every output element as a sympy expression of the input elements (for small
        inputs), structured like the outputs; ``simplify``: sympy's simplify on each
        formula of at most ``symbolic.SIMPLIFY_OPS`` operations (larger ones as built)."""
        from .symbolic import MAX_ELEMENTS, input_symbols, symbolic_values  # late: sympy
        env = {}
        for node, name in zip(self.raw.inputs, self.raw.input_names):
            if node.size > MAX_ELEMENTS:
                raise ValueError(f"symbolic(): input {name} has {node.size} elements; "
                                 f"symbolic evaluation is for inputs up to {MAX_ELEMENTS}")
            env[id(node)] = input_symbols(ident(name), node.shape)
        for node in self.aux:
            env[id(node)] = np.zeros(node.shape, dtype=object)
        try:
            vals = symbolic_values(self.raw.outputs, env, simplify=simplify)
        except RecursionError:
            raise ValueError("symbolic(): the formulas are nested deeper than sympy can "
                             "handle (a long chain of operations); inspect formulas() or "
                             "as_text() instead, or a shorter program") from None
        return pytree.unflatten(self.signature[2], vals)

    def dot(self, optimized: bool = True) -> str:
        return (self.optimized if optimized else self.raw).dot()

    def compile(self):
        """The backend executable (cached on this Lowered)."""
        if self._exe is None:
            clock = self._clock
            program = self.optimized
            self._exe = get_backend(self.backend).compile_program(
                program, target=self.target, on_stage=clock.enter if clock else None)
            if clock is not None:
                clock.enter(None)
        return self._exe


def run_stages(transform: Transform, tr, key, names, clock: StageClock) -> _Stages:
    """Everything after tracing: stabilise, transform, simplify, transposed products,
    simplify again (permutes of permutes), fuse."""
    structure, specs, static = key
    traced_count = count_nodes(tr.out_nodes)
    with clock.stage("autodiff"):
        built = apply_transform(transform, tr, structure, names)
    aux = built.aux or []
    inputs = tr.input_nodes + aux
    in_names = names + [n.attr("name") for _, n in tr.closure] + [a.attr("name") for a in aux]
    raw = Program(inputs, in_names, built.outputs, built.names)
    transformed = count_nodes(built.outputs)
    with clock.stage("rewrite"):
        rewritten = rewrite(built.outputs)
    with clock.stage("fuse"):
        optimized_outs = in_bodies(fuse)(rewritten)
    donated = ()
    if tr.effects is not None and transform.name == "compile" \
            and len(optimized_outs) == len(tr.out_nodes):
        donated = tr.effects.donations(len(optimized_outs), inputs)
    optimized = Program(inputs, in_names, optimized_outs, built.names, built.structure,
                        donated)
    stats = {"traced": traced_count, "transform": transform.name,
             "transformed": transformed, "optimized": count_nodes(optimized_outs),
             "fused": sum(1 for n in toposort(optimized_outs) if n.op == "fused"),
             "times": clock.times}
    return _Stages(raw, stats, optimized, aux, (structure, specs, built.structure))


def apply_transform(transform: Transform, tr, structure, names):
    """The traced program's outputs after ``transform`` (stabilised first, so gradients
    are stable too): what ``transform.build`` returns (outputs, names, structure, aux)."""
    if tr.hooked and transform.name != "compile":
        raise RuntimeError(
            f"symgrad.{transform.name} builds gradients symbolically and cannot run tensor "
            "hooks registered on traced tensors (register_hook); call loss.backward() inside "
            "symgrad.compile (the recorded graph runs them), or apply the hook's change in "
            "the function itself")
    outs = in_bodies(stabilize)(tr.out_nodes)
    groups = _arg_groups(tr.arg_nodes, names, structure)
    return transform.build(outs, tr.out_structure, groups, names)


def _rewrite(outputs):
    return simplify(transpose_products(simplify(simplify(outputs))))


def rewrite(outputs):
    """The rewrite stage: the graph rewrites (in loop bodies too), then loops that a
    larger loop computes become slices of it."""
    return simplify(share_loops(in_bodies(_rewrite)(list(outputs))))


def optimize(outputs):
    """Every stage after the transform: :func:`rewrite`, then fusion (in loop bodies too)."""
    return in_bodies(fuse)(rewrite(outputs))


def schedule_of(lowered: Lowered):
    """The LLVM schedule of a lowered program (for an executable reloaded without it)."""
    return get_backend("llvm").schedule(lowered.optimized, lowered.target)


def make_target(spec):
    """A validated ``codegen.target.Target`` (None: the current one)."""
    return get_backend("llvm").make_target(spec)


def _arg_groups(arg_nodes, names, structure):
    """Per positional (dynamic) argument: (its leaf nodes, their names, its structure)."""
    groups, i = [], 0
    for sub in structure[1]:
        k = len(pytree.flatten(pytree.unflatten(sub, [0] * pytree.num_leaves(sub)))[0])
        groups.append((arg_nodes[i:i + k], names[i:i + k], sub))
        i += k
    return groups


def ident(name: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    return out or "x"


