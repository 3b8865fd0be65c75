"""Test-suite setup. The torch oracle is required: a missing torch is an error, not a
skip (CI installs it through the `test` extra)."""
import os

import torch  # noqa: F401  -- fail loudly if the oracle is missing

os.environ.setdefault("SYMGRAD_CACHE_DIR", os.path.join(os.path.dirname(__file__), ".cache"))
