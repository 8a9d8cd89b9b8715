"""``--greeter=naive`` runs the recovery tests against `naive.NaiveGreeter` instead of the fixed
`greeter.Greeter`."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--greeter", choices=("fixed", "naive"), default="fixed",
                     help="which Greeter the recovery tests run against (default: fixed)")


@pytest.fixture
def reconciler(request: pytest.FixtureRequest) -> type:
    """The Greeter class under test."""
    if request.config.getoption("--greeter") == "naive":
        from naive import NaiveGreeter

        return NaiveGreeter
    from greeter import Greeter

    return Greeter
