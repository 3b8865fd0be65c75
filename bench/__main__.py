"""Entry point: ``python -m bench [--quick] [--only W] [--systems S] [--json P] [--plot P]``
from the repository, or ``python path/to/bench ...`` from any directory."""
import os
import sys

if not __package__:        # run by path: make the checkout importable (bench, symgrad, codegen)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.cli import main  # noqa: E402

raise SystemExit(main())
