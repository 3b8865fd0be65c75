"""The PyTorch-named operations users call (``symgrad.exp``, ``Tensor.sum``, ...):
argument handling, type promotion, PyTorch's grad_fn names and error texts, on top of the
primitives. One module per family."""
