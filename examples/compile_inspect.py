"""Compile a gradient once, call it many times, and look at every stage.

Run: python examples/compile_inspect.py
"""
import numpy as np

import symgrad


def loss(x):
    return (3 * (x + 2) ** 2).mean()


f = symgrad.value_and_grad(loss)
x = np.ones((2, 2))
value, grad = f(x)
print("value:", value)
print("grad:\n", grad)

lowered = f.lower(x)
print("\n-- the program after symbolic differentiation and rewrites --")
print(lowered.as_text())
print("\n-- fused elementwise kernels as formulas --")
for name, formula in lowered.formulas().items():
    print(f"{name}: {formula}")
print("\n-- every output element as a formula of the inputs --")
v, g = lowered.symbolic()
print("value =", v)
print("d value / d x[0, 0] =", g[0, 0])

exe = lowered.compile()
if hasattr(exe, "as_text"):
    kinds = ("llvm-opt", "asm") if lowered.backend == "llvm" else ("program",)
    for kind in kinds:
        text = exe.as_text(kind)
        print(f"\n-- {kind} (first lines) --")
        print("\n".join(text.splitlines()[:12]))

for _ in range(1000):
    f(x)
print("\ncache:", f.cache_info())
