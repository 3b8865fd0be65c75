"""``backends.cudnn``: no cuDNN on the CPU; its flags are kept as set."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    return False


def version():
    return None
