"""The schedule of a program: what is materialised where, and in which steps.

Input: a :class:`symgrad.graph.program.Program`.  Output: a :class:`Plan` --

* **roots**: nodes that get storage of their own: outputs, reductions, window ops
  (pad_slice, cat), opaque ops (matmul, indexing, ...), numpy-rule nodes, bases of the
  arguments of opaque/numpy nodes, and elementwise nodes that would otherwise be
  recomputed in several places although they are expensive (cost > ``RECOMPUTE_COST``);
* every other node is *virtual*: a layout op is index arithmetic, an elementwise node
  is recomputed inside each loop that reads it (cheap nodes only, see above);
* **steps**, in order: :class:`LoopStep` (one loop nest over one shape computing
  several *items* -- stores of elementwise values and reductions -- so consumers of the
  same input share one pass and one set of registers; an item's trailing dims of at
  most ``UNROLL_MAX`` elements are unrolled, so a row-wise reduction (softmax over 10
  classes, a matrix-vector product) and its elementwise consumers share one loop over
  rows), :class:`NodeStep` (an opaque
  lowering, or a numpy rule in a hybrid executable) and :class:`CopyStep`;
* **storage**: inputs and outputs are the caller's buffers (an output root is computed
  straight into its output array, also through a reshape); temporaries share one arena
  whose offsets come from live ranges; hybrid executables pass buffers crossing a numpy
  step as ``ext`` slots.

Loop placement is greedy in topological order: an item joins the latest loop of its
shape whose inputs are all complete before it -- or computed in that same loop at the
same index (then the value is a register, never reloaded).

This module runs the two stages: :mod:`codegen.schedule` (roots, loop placement, the
steps) then :mod:`codegen.buffers` (storage and the arena); the records they fill are
:mod:`codegen.steps`.

>>> import numpy as np, symgrad
>>> f = symgrad.compile(lambda x: (x * 2).exp().sum() + x.sum(), backend="numpy")
>>> plan = build_plan(f.lower(np.ones(3)).optimized)
>>> [type(s).__name__ for s in plan.steps]      # one loop computes both sums
['LoopStep', 'LoopStep']
"""
from __future__ import annotations

from .buffers import ARENA_ALIGN, allocate
from .rewrite import matvec_as_reduction
from .schedule import CONE_COST, RECOMPUTE_COST, UNROLL_MAX, Planner, cone_limit
from .steps import (CopyStep, Item, LoopStep, NodeStep, Plan, Storage, inline_reduction,
                    reduced_axes, same_point)

__all__ = ["Plan", "Storage", "Item", "LoopStep", "NodeStep", "CopyStep", "build_plan",
           "RECOMPUTE_COST", "CONE_COST", "cone_limit", "ARENA_ALIGN", "UNROLL_MAX", "same_point",
           "inline_reduction", "reduced_axes"]


def build_plan(program) -> Plan:
    """Schedule ``program`` (see the module docstring)."""
    planner = Planner(matvec_as_reduction(program))
    steps, produced = planner.run()
    return allocate(planner, steps, produced)
