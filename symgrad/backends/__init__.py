"""``symgrad.backends``: PyTorch's ``torch.backends`` switches as a CPU-only build has
them -- ``cudnn`` and ``mps`` are not available, ``cuda`` is not built, ``mha`` holds the
attention fast-path switch.  Settable flags are kept (``cudnn.deterministic = True`` in a
seed helper works) and change nothing in symgrad's kernels, which are deterministic."""
from . import cuda, cudnn, mha, mps

__all__ = ["cuda", "cudnn", "mha", "mps"]
