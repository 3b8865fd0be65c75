"""``backends.mha``: the attention fast-path switch (symgrad has one attention path;
the switch is kept as set)."""
_fastpath = [True]


def get_fastpath_enabled() -> bool:
    return _fastpath[0]


def set_fastpath_enabled(value: bool) -> None:
    _fastpath[0] = bool(value)
