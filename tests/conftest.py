"""Test-suite setup. The torch oracle is required: a missing torch is an error, not a
skip (CI installs it through the `test` extra)."""
import os

import torch  # noqa: F401  -- fail loudly if the oracle is missing

os.environ.setdefault("SYMGRAD_CACHE_DIR", os.path.join(os.path.dirname(__file__), ".cache"))


def pytest_report_header(config):
    """The CPU the run is on, as LLVM and the OS name it, and torch's version: a failure
    that only one host shows can then be traced to the host."""
    import platform

    from codegen.target import host
    t = host()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), "")
    except OSError:
        pass
    return [f"host: {platform.machine()} {model or platform.processor()}; LLVM cpu {t.cpu}; "
            f"torch {torch.__version__}"]
