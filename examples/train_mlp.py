"""A training loop on one compiled value-and-gradient: traced and compiled on the first
step, every later step is one native call.

An MLP written as in PyTorch (``linear`` with ``(out, in)`` weights, tanh, softmax
cross-entropy) learns to classify points drawn around 10 random centres; plain SGD with
momentum, numpy arrays in and out.

Run: python examples/train_mlp.py
"""
import time

import numpy as np

import symgrad
import symgrad.nn.functional as F


def loss(W1, b1, W2, b2, X, labels):
    hidden = F.linear(X, W1, b1).tanh()
    return F.cross_entropy(F.linear(hidden, W2, b2), labels)


def data(rng, n, centres):
    labels = rng.integers(0, len(centres), n)
    return centres[labels] + rng.standard_normal((n, centres.shape[1])), labels


rng = np.random.default_rng(0)
D, H, C, BATCH = 32, 128, 10, 64
centres = rng.standard_normal((C, D)) * 0.4       # overlapping classes
X_test, y_test = data(rng, 2000, centres)
params = [rng.uniform(-1, 1, (H, D)) / np.sqrt(D), np.zeros(H),
          rng.uniform(-1, 1, (C, H)) / np.sqrt(H), np.zeros(C)]
velocity = [np.zeros_like(p) for p in params]

step = symgrad.value_and_grad(loss, argnums=(0, 1, 2, 3))   # compiled on the first call
predict = symgrad.compile(lambda W1, b1, W2, b2, X: F.linear(F.linear(X, W1, b1).tanh(), W2, b2))

t0 = time.perf_counter()
for it in range(301):
    X, y = data(rng, BATCH, centres)
    value, grads = step(*params, X, y)
    for p, v, g in zip(params, velocity, grads):
        v *= 0.9
        v -= 0.05 * g
        p += v                                       # in place: the same arrays next step
    if it % 100 == 0:
        print(f"step {it:3d}  loss {value:.4f}")
    if it == 0:
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
per_step = (time.perf_counter() - t0) / 300

accuracy = (predict(*params, X_test).argmax(1) == y_test).mean()
print(f"test accuracy {accuracy:.3f}")
print(f"first step (trace, differentiate, compile) {t_first * 1e3:.0f} ms; "
      f"then {per_step * 1e6:.0f} us per step (drawing the batch and the SGD update included)")
print("cache:", step.cache_info())
