"""Errors carry kube-apiserver's ``Status``: the wire form equals `Status.to_dict`."""

from __future__ import annotations

import pytest

from emu.apiserver.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    Status,
    StatusCause,
)


@pytest.mark.parametrize("err", [
    Conflict("rayclusters", "rc", "ray.io"),
    Conflict("configmaps", "cm"),
    Conflict("pods", "p", why="Precondition failed: UID in precondition: a, UID in object meta: b"),
    NotFound("pods", "p"),
    AlreadyExists("rayjobs", "j", "ray.io"),
    Invalid("ConfigMap", "c", [StatusCause("FieldValueInvalid", "bad", "data[x]")]),
    BadRequest("no"),
    Gone("too old"),
])
def test_an_errors_status_is_the_status_object_as_the_wire_carries_it(err: ApiError):
    assert err.status == Status(err.code, err.reason, err.message, err.details).to_dict()
    assert ApiError.from_status(err.status).status == err.status


def test_a_stale_update_conflict_reads_as_kubernetes_writes_it():
    err = Conflict("rayclusters", "rc", "ray.io")
    assert str(err) == ('Operation cannot be fulfilled on rayclusters.ray.io "rc": the object '
                        "has been modified; please apply your changes to the latest version "
                        "and try again")
    assert err.status["details"] == {"name": "rc", "group": "ray.io", "kind": "rayclusters"}
    assert (err.code, err.reason) == (409, "Conflict")
