"""A small kopf operator for tests/http/test_kopf.py: it answers each Greeting with a message in
its status, and records which operator process handled it."""

import os

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: object) -> None:
    settings.watching.server_timeout = 60
    settings.watching.client_timeout = 90
    settings.posting.level = 100  # no Events for kopf's own log lines


@kopf.on.create("example.com", "v1", "greetings")
def greet(spec: dict, name: str, **_: object) -> dict:
    return {"message": f"hello {spec.get('text', name)}", "pid": os.getpid()}
