"""Unit tests of the API server's parts (selectors, patches, store, validation, kinds) need no
fixtures beyond plain values; this file keeps the directory's conftest explicit."""
