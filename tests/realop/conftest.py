"""Fixtures for the tests against the real operator (the helpers live in realop_serving.py,
importable by the tests)."""

from __future__ import annotations

from realop_serving import kuberay_binary, pytest_configure, served

__all__ = ["kuberay_binary", "pytest_configure", "served"]
