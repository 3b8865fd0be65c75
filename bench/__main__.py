"""Entry point: ``python -m bench [--quick] [--only W] [--systems S] [--json P] [--plot P]``."""

from bench.cli import main

raise SystemExit(main())
