"""symgrad's version: the one place it is written (``pyproject.toml`` reads it from here).
A leaf module, so the code generator can key its caches on it without importing the
front end."""
__version__ = "0.1.0"
