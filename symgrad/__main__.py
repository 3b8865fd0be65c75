"""``python -m symgrad``: see :mod:`symgrad.cli`."""
import sys

from .cli import main

sys.exit(main())
