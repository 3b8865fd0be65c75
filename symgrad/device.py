"""Devices, as PyTorch names them: symgrad computes on the CPU. ``device("cuda")`` can be
named (as in PyTorch) but asking to put data there raises PyTorch's CPU-build error."""
from __future__ import annotations

__all__ = ["device", "check_device", "cuda"]

_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
          "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class device:
    """``symgrad.device("cpu")``, ``device("cuda:0")``, ``device("cpu", 0)``.

    >>> device("cpu"), str(device("cuda", 1))
    (device(type='cpu'), 'cuda:1')
    """

    __slots__ = ("type", "index")

    def __init__(self, type: "str | device", index: int | None = None):
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got "
                            f"({_typename(type)}), but expected one of:\n * (torch.device device)"
                            "\n * (str type, int index = -1)")
        name, sep, idx = type.partition(":")
        if name not in _TYPES:
            raise RuntimeError("Expected one of " + ", ".join(_TYPES) + " device type at start "
                               f"of device string: {type}")
        if sep:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index was "
                                   f"passed explicitly: {type}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx)
        object.__setattr__(self, "type", name)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'torch.device' objects is not writable")

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))


def _typename(x) -> str:
    return type(x).__name__


def check_device(d) -> None:
    """Raise PyTorch's error for a device this build cannot put data on (anything but
    the CPU); ``None`` and CPU devices pass."""
    if d is None:
        return
    if isinstance(d, int) and not isinstance(d, bool):
        d = device("cuda", d)
    dev = d if isinstance(d, device) else device(d)
    if dev.type == "cpu":
        return
    if dev.type == "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    raise RuntimeError(f"symgrad runs on the CPU only: device type {dev.type!r} is not "
                       "available")


class _Cuda:
    """``symgrad.cuda``: no CUDA here."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0

    @staticmethod
    def manual_seed(seed: int) -> None:
        return None

    manual_seed_all = manual_seed

    @staticmethod
    def current_device() -> int:
        raise AssertionError("Torch not compiled with CUDA enabled")

    @staticmethod
    def synchronize(device=None) -> None:
        raise AssertionError("Torch not compiled with CUDA enabled")


cuda = _Cuda()
CPU = device("cpu")
