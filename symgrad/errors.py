"""Error texts that several modules raise (one place for each message)."""
from __future__ import annotations

import traceback

__all__ = ["traced_value_error", "TracerBoolError", "LinAlgError", "type_name"]


class TracerBoolError(TypeError):
    """Python needed a concrete value from a symbolic (traced) tensor."""


class _LinAlgError(RuntimeError):
    """A linear-algebra routine failed on its input (a singular matrix to invert or solve
    with, a matrix that is not positive-definite for a Cholesky factor): PyTorch's
    ``torch.linalg.LinAlgError``, a RuntimeError (its class is named ``_LinAlgError``)."""


LinAlgError = _LinAlgError


def type_name(obj) -> str:
    """The type name CPython's ``tp_name`` gives (what PyTorch's messages quote): a class
    defined in Python by its name, a builtin or extension type with its module
    (``int``, ``numpy.ndarray``, ``numpy.float64``)."""
    cls = type(obj)
    if cls.__flags__ & (1 << 9) or cls.__module__ == "builtins":    # Py_TPFLAGS_HEAPTYPE
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _user_frame() -> str:
    for frame in reversed(traceback.extract_stack()[:-3]):
        if "/symgrad/" not in frame.filename.replace("\\", "/"):
            return f'{frame.filename}:{frame.lineno} ("{(frame.line or "").strip()}")'
    return "<unknown>"


def traced_value_error(what: str) -> TracerBoolError:
    """The error for `if x.sum() > 0:` and friends inside symgrad.compile."""
    return TracerBoolError(
        f"{what} needs a concrete value, but this tensor is symbolic: it is being traced by "
        f"symgrad.compile and has no value until the compiled function runs. Called at "
        f"{_user_frame()}. Python control flow cannot depend on traced values: use "
        f"symgrad.where(cond, a, b) to select values, or pass the argument that decides the "
        f"branch in static_argnums so each value gets its own compiled version.")
