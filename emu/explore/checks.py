"""The emulator's own consistency checks, made during every explore run beside the invariants.

An invariant says what KubeRay (or your operator) promises; these say whether the *emulator*
behaved as it should while the run broke it. When one fires, a finding of the same run may be
the emulator's artefact rather than the operator's behaviour, and the explorer classes it
``emulator-suspect`` (`emu.explore.known.classify`). Each check is an observation beside the
run — trace subscribers and a loop exception handler — so it changes neither the run nor its
trace digest.

- ``reconcile-panic``: a reconciler raised a Python error that means a bug in the code that
  raised it (``KeyError``, ``TypeError``, ...; `emu.runtime.controller.is_panic`). In the
  KubeRay port that is a porting bug far more often than KubeRay's: Go code that compiles has no
  ``KeyError``. The port's deliberate ports of Go ``panic`` calls (types named ``...Panic``) are
  KubeRay's behaviour and do not count.
- ``loop-exception``: an exception escaped into the event loop (a callback that raised, a task
  whose exception nobody retrieved): the world's own machinery failed (docs/findings.md E3, E5,
  E7 were of this kind). A task's is reported when the garbage collector frees it, whose timing
  is the process's, not the run's: those records are placed at the run's end, in text order, so
  a run's records do not depend on when the collector ran (a task still not freed when the run
  ends is not seen; collecting at every run's end would cost a quarter of a run).
- ``hot-loop``: a controller reconciled one key over
  `emu.runtime.controller.HOT_LOOP_RECONCILES` times back to back, so the emulator charged each
  further pass virtual time — a documented deviation (docs/deviations.md, "A hot reconcile loop
  costs virtual time"): how long such a loop lasts is the emulator's estimate, not a cluster's.
- ``emulator-only-fault``: the plan holds a fault whose type says it models something no real
  cluster does (a class attribute ``emulator_only = "why"`` on a `emu.faults.Fault` subclass;
  none of the built-in faults sets it, a fault type of your own may).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..simulation import Simulation

Obj = dict[str, Any]

#: Every check's name, with what it means for a finding of the same run (docs/explore.md).
CHECKS = {
    "reconcile-panic": "a reconciler raised a Python error (a bug of the port or of the "
                       "emulator, not a behaviour Go code has)",
    "loop-exception": "an exception escaped into the emulator's event loop (its own machinery "
                      "failed)",
    "hot-loop": "a controller hot-looped and the emulator charged it virtual time "
                "(docs/deviations.md, 'A hot reconcile loop costs virtual time')",
    "emulator-only-fault": "the plan holds a fault that models nothing a real cluster does",
}

#: How many records of one check a run keeps (the first ones; the count says how many there were).
KEEP = 3


def emulator_only(faults: Iterable[Any]) -> list[Obj]:
    """A ``emulator-only-fault`` record for each fault (or an `AtCall`'s ``then``) whose type
    sets ``emulator_only`` to a reason."""
    out: list[Obj] = []
    for fault in faults:
        for f in (fault, getattr(fault, "then", None)):
            why = str(getattr(type(f), "emulator_only", "") or "") if f is not None else ""
            if why:
                out.append({"check": "emulator-only-fault", "at": float(getattr(fault, "at", 0.0)),
                            "detail": f"{type(f).__name__} is emulator-only: {why}"})
    return out


class EmulatorChecks:
    """The checks of one run: ``attach`` before the plan is scheduled, ``finish`` at its end
    (the records, in the order they happened)."""

    def __init__(self, sim: Simulation) -> None:
        from ..runtime.controller import HOT_LOOP_COST, HOT_LOOP_RECONCILES

        self.sim = sim
        self.records: list[Obj] = []
        self._counts: dict[str, int] = {}
        self._panics_before = len(sim.panics)
        self._gap = HOT_LOOP_COST * 1.5
        self._limit = HOT_LOOP_RECONCILES
        self._streaks: dict[tuple[str, str, str], tuple[float, int]] = {}
        self._loop: Any = sim.loop
        self._freed: list[str] = []
        self._previous = self._loop.get_exception_handler()
        self._loop.set_exception_handler(self._on_exception)
        sim.trace.subscribe(self._on_event)

    @classmethod
    def attach(cls, sim: Simulation) -> EmulatorChecks:
        return cls(sim)

    def _add(self, check: str, at: float, detail: str) -> None:
        n = self._counts.get(check, 0) + 1
        self._counts[check] = n
        if n <= KEEP:
            self.records.append({"check": check, "at": round(at, 6), "detail": detail})

    def _on_event(self, ev: Any) -> None:
        if ev.event != "reconcile_started":
            return
        key = (ev.process, str(ev.fields.get("controller")), str(ev.fields.get("key")))
        last, streak = self._streaks.get(key, (-1.0, 0))
        streak = streak + 1 if ev.t - last <= self._gap else 1
        self._streaks[key] = (ev.t, streak)
        if streak == self._limit + 1:
            self._add("hot-loop", ev.t,
                      f"controller {key[1]} of {key[0]} reconciled {key[2]} over {self._limit} "
                      f"times back to back from t={ev.t:.3f}s; the emulator charged each further "
                      "pass virtual time (docs/deviations.md)")

    def _on_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        what = f"{type(exc).__name__}: {exc}" if exc is not None else ""
        message = str(context.get("message") or "")
        detail = "; ".join(x for x in (message, what) if x) or "an exception in the loop"
        if "handle" in context:  # a callback that raised: at its instant of the run
            self._add("loop-exception", self.sim.now, detail)
        else:  # a task or future freed with its exception unread: whenever the collector ran
            self._freed.append(detail)
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)

    def finish(self, plan: Iterable[Any] = ()) -> list[Obj]:
        """Every record of the run, by time: the panics it reported, the exceptions that
        reached the loop, the hot loops, and the plan's emulator-only faults. Puts the loop's
        exception handler back."""
        if self._loop.get_exception_handler() == self._on_exception:
            self._loop.set_exception_handler(self._previous)
        for detail in sorted(self._freed):
            self._add("loop-exception", self.sim.now, detail)
        for panic in self.sim.panics[self._panics_before:]:
            kind = str(panic.error).split(":", 1)[0]
            if kind.endswith("Panic"):
                continue  # a port of Go's own panic(): KubeRay's behaviour
            self._add("reconcile-panic", panic.t, panic.summary())
        records = self.records + emulator_only(plan)
        for check, n in sorted(self._counts.items()):
            if n > KEEP:
                records.append({"check": check, "at": records[-1]["at"] if records else 0.0,
                                "detail": f"... and {n - KEEP} more {check} record(s)"})
        return sorted(records, key=lambda r: (r["at"], r["check"], r["detail"]))
