"""The result store: one JSON line per finished run under ``--out DIR`` (``runs.jsonl``), keyed
by the run's spec, so a later ``emu explore`` with the same workload and seed skips what is
already there and resumes. A header line records the workload and seed; a store made for a
different one is refused rather than mixed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from .runner import RunResult


class StoreMismatch(ValueError):
    """The store under ``--out`` was made for another workload or seed, is not a store, or
    cannot be made there."""


class Store:
    """Append-only JSONL of `RunResult` (``None``: a store that keeps nothing)."""

    def __init__(self, directory: str | Path | None, *, workload: str, seed: int) -> None:
        self.header = {"workload": workload, "seed": seed}
        self.results: dict[str, RunResult] = {}
        self.path: Path | None = None
        if directory is None:
            return
        folder = Path(directory)
        if folder.exists() and not folder.is_dir():
            raise StoreMismatch(f"cannot keep the result store in {folder}: it is not a "
                                "directory; use another --out directory")
        self.path = folder / "runs.jsonl"
        #: Made at the first result, so a search refused before any run leaves nothing behind.
        self._new = True
        if self.path.exists():
            lines = self.path.read_bytes().splitlines()
            if lines:
                try:
                    head = orjson.loads(lines[0])
                except orjson.JSONDecodeError:
                    head = None
                if not isinstance(head, dict) or "header" not in head:
                    raise StoreMismatch(
                        f"{self.path} is not a result store of emu explore (its first line is "
                        "not a header); use another --out directory")
                if head.get("header") != self.header:
                    raise StoreMismatch(
                        f"{self.path} holds runs of {head.get('header')}, not {self.header}; "
                        "use another --out directory")
                self._new = False
            for line in lines[1:]:
                try:
                    item = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a line cut short by an interrupted run: run it again
                result = RunResult.from_dict(item)
                self.results[result.spec.key()] = result

    def get(self, key: str) -> RunResult | None:
        return self.results.get(key)

    def add(self, result: RunResult) -> None:
        key = result.spec.key()
        if key in self.results:
            return
        self.results[key] = result
        if self.path is not None:
            if self._new:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_bytes(orjson.dumps({"header": self.header}) + b"\n")
                self._new = False
            data: dict[str, Any] = result.to_dict()
            data.pop("actions", None)
            with self.path.open("ab") as fh:
                fh.write(orjson.dumps(data, default=str) + b"\n")
