"""Fixtures for the HTTP tests (the helpers live in serving.py, importable by the tests)."""

from __future__ import annotations

from serving import kubectl_found, served

from tests.external import pytest_configure

__all__ = ["kubectl_found", "pytest_configure", "served"]
