"""The naive Greeter: the same controller with one plausible mistake.

It treats AlreadyExists from its own create as "somebody else holds the name". That is right
when another client made the ConfigMap, and wrong when the name is held by *this* controller's
own earlier request — one whose response was lost, so the caller timed out and retried. The
Greeting then ends ``Failed`` although its ConfigMap is there and is its own.
``test_recovery.py::test_a_lost_create_response_is_adopted_not_reported_as_a_name_clash``
fails against this class; `greeter.Greeter` fixes it.
"""

from __future__ import annotations

from greeter import Greeter, Obj

from emu import AlreadyExists


class NaiveGreeter(Greeter):
    async def create_or_adopt(self, cm: Obj) -> Obj | None:
        try:
            return await self.create_retrying(cm)
        except AlreadyExists:
            return None  # "the name is taken": but maybe by our own first attempt
