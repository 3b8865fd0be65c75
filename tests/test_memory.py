"""symgrad.memory: glibc's malloc thresholds set at import, and left alone with
SYMGRAD_MALLOC_TUNING=0."""
import ctypes
import os
import platform
import subprocess
import sys

import pytest

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _tuned(env_value):
    env = dict(os.environ)
    env.pop("SYMGRAD_MALLOC_TUNING", None)
    if env_value is not None:
        env["SYMGRAD_MALLOC_TUNING"] = env_value
    out = subprocess.run([sys.executable, "-c", "import symgrad; print(symgrad.memory.tuned)"],
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's: other C libraries are left "
                    "alone (test_env_leaves_malloc_alone runs everywhere)")
def test_tuned_at_import_on_glibc():
    assert _tuned(None) == "True"


def test_env_leaves_malloc_alone():
    assert _tuned("0") == "False"


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's: other C libraries are left "
                    "alone (test_env_leaves_malloc_alone runs everywhere)")
def test_thresholds_are_accepted_by_glibc():
    """mallopt accepts the values (it returns 0 for a threshold past its maximum)."""
    from symgrad import memory
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    assert mallopt(-3, memory.MMAP_THRESHOLD) == 1
    assert mallopt(-1, memory.TRIM_THRESHOLD) == 1
