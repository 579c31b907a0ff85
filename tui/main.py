"""The ``tokrace`` command: the command line, handed a way to open the screen so that it never imports Textual."""

from __future__ import annotations

import sys

from .cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
