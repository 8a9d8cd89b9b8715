"""The ``external`` marker, as the HTTP tests register it (their helpers serve these tests too)."""

from __future__ import annotations

from tests.http.serving import pytest_configure

__all__ = ["pytest_configure"]
