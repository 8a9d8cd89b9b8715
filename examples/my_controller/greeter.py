"""A small user-written controller on `emu.runtime`: one ConfigMap per ``Greeting``.

A ``Greeting`` (``example.com/v1``, a custom resource) says ``spec.message``; the controller keeps
a ConfigMap ``<name>-greeting`` holding that message, owned by the Greeting, and reports
``status.phase``: ``Ready`` when the ConfigMap is right, ``Failed`` (final) when the name is held
by a ConfigMap the Greeting does not own: it never takes over somebody else's object.

This is the fixed version. `naive.py` differs in one method, `Greeter.create_or_adopt`, and
``test_recovery.py`` has the test that tells them apart.
"""

from __future__ import annotations

from typing import Any

from emu import AlreadyExists, NotFound, Simulation, Timeout
from emu.apiserver.kinds import KindInfo
from emu.runtime import Manager, OperatorConfig, Request, Result, start_operator

Obj = dict[str, Any]

GROUP, VERSION, KIND = "example.com", "v1", "Greeting"
API_VERSION = f"{GROUP}/{VERSION}"


def register_greeting_kind(sim: Simulation) -> None:
    """Serve the ``Greeting`` custom resource (what applying its CRD does in a real cluster)."""
    sim.api.kinds.register(KindInfo(GROUP, VERSION, KIND, "greetings", has_status=True,
                                    has_generation=True))


def greeting(name: str, message: str, namespace: str = "default") -> Obj:
    """A Greeting manifest."""
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"message": message}}


def configmap_name(greeting_name: str) -> str:
    return f"{greeting_name}-greeting"


def owned_by(obj: Obj, owner: Obj) -> bool:
    """Whether ``obj`` names ``owner`` (by uid) as its controller."""
    uid = owner["metadata"]["uid"]
    return any(ref.get("uid") == uid and ref.get("controller")
               for ref in obj["metadata"].get("ownerReferences") or [])


class Greeter:
    """The reconciler: reads through the manager's cache, writes to the API server."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.client = mgr.get_client()          # cached reads, writes over the network
        self.reader = mgr.get_api_reader()      # uncached reads, straight from the API server

    async def reconcile(self, request: Request) -> Result:
        try:
            g = await self.client.get(KIND, request.name, request.namespace)
        except NotFound:
            return Result()                     # deleted: the garbage collector owns the rest
        if (g.get("status") or {}).get("phase") == "Failed":
            return Result()                     # Failed is final, as a Job's is
        name = configmap_name(request.name)
        try:
            cm = await self.client.get("ConfigMap", name, request.namespace)
        except NotFound:
            cm = await self.create_or_adopt(self.desired_configmap(g))
            if cm is None:
                return await self.set_phase(g, "Failed", f"ConfigMap {name} already exists")
        if not owned_by(cm, g):
            return await self.set_phase(g, "Failed",
                                        f"ConfigMap {name} exists and is not this Greeting's")
        if cm.get("data") != {"message": g["spec"]["message"]}:
            cm["data"] = {"message": g["spec"]["message"]}
            await self.client.update(cm)        # a stale read is a Conflict: retried
        return await self.set_phase(g, "Ready", "")

    def desired_configmap(self, g: Obj) -> Obj:
        meta = g["metadata"]
        return {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": configmap_name(meta["name"]), "namespace": meta["namespace"],
                "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND,
                                     "name": meta["name"], "uid": meta["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "data": {"message": g["spec"]["message"]},
        }

    async def create_or_adopt(self, cm: Obj) -> Obj | None:
        """Create the ConfigMap; None when its name is taken.

        A create that timed out is retried once at once. When the retry meets AlreadyExists, the
        first request may well have landed (its response was lost): read what is there, and
        hand it back so the caller checks who owns it.
        """
        try:
            return await self.create_retrying(cm)
        except AlreadyExists:
            meta = cm["metadata"]
            return await self.reader.get("ConfigMap", meta["name"], meta["namespace"])

    async def create_retrying(self, cm: Obj) -> Obj:
        try:
            return await self.client.create(cm)
        except Timeout:
            self.mgr.log("create_timed_out", name=cm["metadata"]["name"])
            return await self.client.create(cm)

    async def set_phase(self, g: Obj, phase: str, message: str) -> Result:
        status = {"phase": phase, "message": message}
        if g.get("status") != status:
            g["status"] = status
            await self.client.update_status(g)
        return Result()


def setup(reconciler: type[Greeter] = Greeter) -> Any:
    """The manager setup: reconcile Greetings, and their owned ConfigMaps."""

    def register(mgr: Manager, config: OperatorConfig) -> None:
        (mgr.new_controller()
         .for_(KIND, api_version=API_VERSION)
         .owns("ConfigMap")
         .complete(reconciler(mgr)))

    return register


def start_greeter(sim: Simulation, replicas: int = 2, reconciler: type[Greeter] = Greeter,
                  **config: Any) -> list[Any]:
    """Start ``replicas`` operator processes ``greeter-0``, ``greeter-1``, ... electing a leader
    on the Lease ``default/greeter-leader``; the processes."""
    cfg = OperatorConfig(setup=setup(reconciler), leader_election_id="greeter-leader", **config)
    return [start_operator(sim, f"greeter-{i}", cfg) for i in range(replicas)]
