"""Exact-size JSON bytes: the same bytes as orjson's, in a buffer of their own size."""

from __future__ import annotations

import sys

import orjson

from emu.kernel.jsonbytes import dumps_exact, exact


def test_the_bytes_are_orjsons_and_sized_to_their_length():
    obj = {"b": 1, "a": [1, 2, 3], "s": "x" * 60}
    loose = orjson.dumps(obj)
    assert sys.getsizeof(loose) > 1000  # what orjson hands back sits in a larger buffer
    for kept in (exact(loose), dumps_exact(obj)):
        assert kept == loose
        assert sys.getsizeof(kept) < len(kept) + 64
    assert dumps_exact(obj, orjson.OPT_SORT_KEYS) == orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
