"""``symgrad.utils.hooks``: :class:`RemovableHandle`, what every ``register_*hook``
returns (tensor and graph-node hooks, module hooks), as ``torch.utils.hooks``."""
from __future__ import annotations

import itertools
import weakref

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """A handle whose ``remove()`` unregisters one hook: it deletes its id from the hook
    dictionary (an OrderedDict, held weakly as PyTorch holds it) and from any
    ``extra_dict``.

    >>> from collections import OrderedDict
    >>> hooks = OrderedDict()
    >>> h = RemovableHandle(hooks); hooks[h.id] = print
    >>> h.remove(); len(hooks)
    0
    """

    _ids = itertools.count()

    def __init__(self, hooks_dict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle._ids)
        if isinstance(extra_dict, dict):
            self.extra_dict_ref = (weakref.ref(extra_dict),)
        elif isinstance(extra_dict, list):
            self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)
        else:
            self.extra_dict_ref = ()

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<torch.utils.hooks.RemovableHandle object at {hex(id(self))}>"
