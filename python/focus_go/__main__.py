"""``python -m focus_go``: the ``focus-go`` command, whose parts live in ``focus_go.cli``."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
