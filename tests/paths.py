"""Where the repository and the shared test data are, so a test finds them wherever its file sits."""

from __future__ import annotations

from pathlib import Path
from typing import Final

TESTS: Final = Path(__file__).resolve().parent
"""The tests folder, where the shared helpers (``conftest``, ``serving``, ...) are imported from."""

ROOT: Final = TESTS.parent
"""The repository: README, examples, the CI script."""

DATA: Final = TESTS / "data"
"""Data shared by tests of several layers (the loopback certificate and key)."""

TRACE_FIXTURES: Final = TESTS / "providers" / "traces" / "fixtures"
"""The trace readers' hand-written fixtures, one folder per format."""
