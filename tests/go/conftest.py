"""The ``external`` marker (``tests/external.py``)."""

from __future__ import annotations

from tests.external import pytest_configure

__all__ = ["pytest_configure"]
