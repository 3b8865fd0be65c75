"""Lowering of scheduled program pieces to LLVM IR: scalar formulas (:mod:`.formula_ir`),
loop nests (:mod:`.loops`), fused elementwise/reduction loops (:mod:`.fused_loop`),
reductions (:mod:`.reduce`), matmul (:mod:`.matmul`), indexing (:mod:`.indexing`) and
the remaining structural primitives (:mod:`.misc`)."""
