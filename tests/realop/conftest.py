"""Fixtures for the tests against the real operator (the helpers live in realop_serving.py,
importable by the tests; the ``external`` marker in tests/external.py)."""

from __future__ import annotations

from realop_serving import kuberay_binary, served

from tests.external import pytest_configure

__all__ = ["kuberay_binary", "pytest_configure", "served"]
