"""The explorer: find recovery bugs nobody wrote a scenario for (``emu explore``).

Separate stages with data passing between them, each callable from a user's own test:
`workload` (manifests + knob space) → `reference` run (every controller action) → `plans`
(crash after each write, pause before a write, lost responses, Pod/Node loss at each state
transition, outages, blips, random combinations) → `runner` (one run is a pure function of
workload, knobs, plan and seed; a fork-server makes runs cheap) → invariants (`emu.invariants`)
and the emulator's own `checks` → `shrink` → `known` (which known finding, its class, what to
do) → `export` (a pytest file and an HTML timeline) → `store` (JSONL, resumable).
`search.explore` ties them together; see docs/explore.md.
"""
