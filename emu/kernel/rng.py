"""The simulation's only source of randomness: one seeded `random.Random`.

UIDs, ``generateName`` suffixes, leader-election jitter and Lease holder identities all come from
here, so a seed decides them all. Sub-streams (`fork`) give a component its own sequence, so that
adding a draw in one component does not shift every other component's draws.

Prior art: madsim ``sim/rand.rs`` (a global seeded RNG), Hypothesis' seeded ``Random``.
"""

from __future__ import annotations

import hashlib
import random

#: The alphabet of Kubernetes' ``utilrand.String`` (no vowels, no confusable digits).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: A uid's random bits keep all but the version nibble and the two variant bits, which are set
#: to version 4 and the RFC 4122 variant.
_UID_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
_UID_SET = (0x4000 << 64) | (0x8000 << 48)


class SimRandom(random.Random):
    """A seeded Random with the helpers the emulated world needs."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.seed_value = seed

    def fork(self, label: str) -> SimRandom:
        """An independent stream derived from this seed and ``label`` (stable across runs)."""
        digest = hashlib.sha256(f"{self.seed_value}:{label}".encode()).digest()
        return SimRandom(int.from_bytes(digest[:8], "big"))

    def uid(self) -> str:
        """A UUID-4-shaped string, as the API server assigns to ``metadata.uid``: 128 random
        bits with the version (4) and RFC 4122 variant bits set, formatted 8-4-4-4-12. Every
        create draws one, so the bits are set with one mask and the text cut from one
        ``bytes.hex`` (a third faster than formatting an int and its slices)."""
        h = ((self.getrandbits(128) & _UID_KEEP) | _UID_SET).to_bytes(16, "big").hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def name_suffix(self, length: int = 5) -> str:
        """The random suffix ``generateName`` appends (Kubernetes uses 5 characters)."""
        return "".join(self.choice(NAME_ALPHABET) for _ in range(length))

    def jitter(self, duration: float, max_factor: float) -> float:
        """client-go ``wait.Jitter``: ``duration + random * max_factor * duration``."""
        if max_factor <= 0.0:
            max_factor = 1.0
        return duration + self.random() * max_factor * duration
