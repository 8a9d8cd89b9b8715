"""Exact-size JSON bytes: the same bytes as orjson's, in a buffer of their own size."""

from __future__ import annotations

import tracemalloc

import orjson

from emu.kernel.jsonbytes import dumps_exact, exact


def _allocated(make):
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        kept = [make() for _ in range(100)]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return kept, sum(d.size_diff for d in after.compare_to(before, "filename"))


def test_the_bytes_are_orjsons_and_sized_to_their_length():
    obj = {"b": 1, "a": [1, 2, 3], "s": "x" * 60}
    loose = orjson.dumps(obj)
    assert exact(loose) == dumps_exact(obj) == loose
    assert dumps_exact(obj, orjson.OPT_SORT_KEYS) == orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    # orjson's own bytes sit in a buffer sized for growth; kept ones cost about their length
    _, loose_size = _allocated(lambda: orjson.dumps(obj))
    _, kept_size = _allocated(lambda: dumps_exact(obj))
    assert kept_size < 100 * (len(loose) + 100) < loose_size
