"""The one error of shape-generic compilation."""

__all__ = ["NotGeneric"]


class NotGeneric(Exception):
    """The program has an operation that cannot run with a runtime extent (the message
    names it); the caller compiles per size instead."""
