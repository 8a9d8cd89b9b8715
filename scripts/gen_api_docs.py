"""Generate docs/api.md, the API reference, from the code's public surface.

    .venv/bin/python scripts/gen_api_docs.py           # rewrite docs/api.md
    .venv/bin/python scripts/gen_api_docs.py --check   # exit 1 if docs/api.md is out of date

What it documents, each entry with its signature and docstring: every name in ``emu.__all__``;
the fault values of ``emu.faults`` that ``emu`` does not re-export; ``emu.runtime.__all__``; the
methods and properties of `Simulation` (with ``sim.faults``), `Client`, `Informer` and
``KubeRayInstall``; the pytest plugin's options (read from its ``pytest_addoption``); and the
``emu`` command's subcommands (their argparse help at a fixed width). ``tests/docs/test_docs.py``
fails when the file differs from what this script writes.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "api.md"
COMMAND = ".venv/bin/python scripts/gen_api_docs.py"
#: argparse wraps help text to the terminal's width; fixed so the output never depends on it.
HELP_COLUMNS = "100"


def _annotation(value: Any) -> str:
    if isinstance(value, str):
        return value
    return getattr(value, "__name__", None) or repr(value)


def _default(value: Any) -> str:
    text = repr(value)
    if text == "NOTHING" or " at 0x" in text or text.startswith("Factory("):
        return "<factory>"
    return text


def signature(obj: Any, name: str) -> str:
    """``name(params)`` with annotations as written in the source (no quotes)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    parts: list[str] = []
    kw_only_marked = False
    for param in sig.parameters.values():
        if param.kind is param.VAR_POSITIONAL:
            kw_only_marked = True
            text = "*" + param.name
        elif param.kind is param.VAR_KEYWORD:
            text = "**" + param.name
        else:
            if param.kind is param.KEYWORD_ONLY and not kw_only_marked:
                parts.append("*")
                kw_only_marked = True
            text = param.name
        if param.annotation is not param.empty:
            text += ": " + _annotation(param.annotation)
        if param.default is not param.empty:
            text += (" = " if param.annotation is not param.empty else "=") + _default(
                param.default)
        parts.append(text)
    out = f"{name}({', '.join(parts)})"
    if (not inspect.isclass(obj) and sig.return_annotation is not sig.empty
            and _annotation(sig.return_annotation) != "None"):
        out += " -> " + _annotation(sig.return_annotation)
    return out


def doc(obj: Any) -> str:
    text = inspect.getdoc(obj) or ""
    if inspect.isclass(obj) and text == inspect.getdoc(obj.__mro__[1]) and obj.__mro__[1] \
            is not object and "__doc__" not in vars(obj):
        return ""  # inherited, not its own
    return text.strip()


def entry(title: str, sig: str, text: str, level: int = 3) -> str:
    lines = [f"{'#' * level} `{title}`", "", "```python", sig, "```", ""]
    if text:
        lines += [text, ""]
    return "\n".join(lines)


def _kind_of(obj: Any) -> str:
    from emu.faults import Fault, FaultPlan

    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return "errors"
    if obj is FaultPlan or (inspect.isclass(obj) and issubclass(obj, Fault)):
        return "faults"
    return "world"


def section_emu() -> Iterator[str]:
    import emu

    yield "## `emu`: the public surface"
    yield ""
    yield ("`import emu`; every name below is in `emu.__all__`. `emu.run(main, seed=...)` runs "
           "`main(sim)` in a fresh world; the pytest plugin's `sim` fixture does the same for "
           "an `async def` test.")
    yield ""
    groups = {"world": "Running a world", "faults": "Fault values and plans",
              "errors": "Errors"}
    for key, heading in groups.items():
        yield f"### {heading}"
        yield ""
        for name in sorted(emu.__all__, key=str.lower):
            obj = getattr(emu, name)
            if _kind_of(obj) != key:
                continue
            bases = ""
            if key == "errors":
                parents = [b.__name__ for b in obj.__bases__]
                bases = f"\n\nSubclass of {', '.join(f'`{p}`' for p in parents)}."
            yield entry(f"emu.{name}", signature(obj, name), doc(obj) + bases, level=4)


def section_more_faults() -> Iterator[str]:
    import emu
    import emu.faults as faults

    yield "## More fault values (`emu.faults`)"
    yield ""
    yield ("Kubernetes and Ray faults, importable from `emu.faults`; like the ones above, each "
           "is a frozen value with `at=` (virtual seconds from the start) that goes into "
           "`emu.run(..., faults=[...])` or `sim.faults.do(fault)`.")
    yield ""
    for name in sorted(faults.__all__, key=str.lower):
        obj = getattr(faults, name)
        if name in emu.__all__ or not (inspect.isclass(obj) and issubclass(obj, faults.Fault)):
            continue
        yield entry(f"emu.faults.{name}", signature(obj, name), doc(obj))


def section_runtime() -> Iterator[str]:
    import emu.runtime as runtime

    yield "## `emu.runtime`: controller-runtime and client-go, ported"
    yield ""
    yield (doc(runtime).split("\n\n")[0] + " Every name in `emu.runtime.__all__`:")
    yield ""
    for name in sorted(runtime.__all__, key=str.lower):
        obj = getattr(runtime, name)
        yield entry(f"emu.runtime.{name}", signature(obj, name), doc(obj))


def _members(cls: type, stop: tuple[type, ...] = (object,)) -> Iterator[tuple[str, Any]]:
    """Public methods and properties, the class's own first, then its bases', in source order."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if klass in stop:
            break
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property):
                seen.add(name)
                yield name, value


def methods(title: str, cls: type, prefix: str, intro: str) -> Iterator[str]:
    yield f"### {title}"
    yield ""
    yield intro
    yield ""
    for name, value in _members(cls):
        if isinstance(value, property):
            yield entry(f"{prefix}.{name}", f"{prefix}.{name}  # property", doc(value), level=4)
            continue
        sig = signature(value, f"{prefix}.{name}").replace("(self, ", "(").replace("(self)", "()")
        if inspect.iscoroutinefunction(value):
            sig = "async " + sig
        yield entry(f"{prefix}.{name}", sig, doc(value), level=4)


def section_methods() -> Iterator[str]:
    from emu.client.client import Client
    from emu.client.informer import Informer
    from emu.faults import Faults
    from emu.kuberay.operator import KubeRayInstall
    from emu.simulation import Simulation

    yield "## Methods"
    yield ""
    yield from methods("`Simulation` (`sim`)", Simulation, "sim",
                       "The world a test runs in (`emu.Simulation`, with what it inherits from "
                       "the kernel's `World`). Attributes besides these: `sim.api` (the API "
                       "server, read directly), `sim.network`, `sim.processes`, `sim.trace`, "
                       "`sim.rng`, `sim.loop`, `sim.seed`, `sim.programs`, `sim.cluster` (with "
                       "`cluster=...`) and `sim.ray_config` (the fake Ray's settings and "
                       "records).")
    yield from methods("`sim.faults`", Faults, "sim.faults",
                       "The fault verbs, performed now and recorded, so a failing run prints "
                       "the plan that replays it.")
    yield from methods("`Client`", Client, "client",
                       "From `sim.client(identity)` (a test's own client) or a manager's "
                       "`get_api_reader()`; every call travels over the emulated network.")
    yield from methods("`Informer`", Informer, "informer",
                       "A list+watch cache of one kind (what `emu.runtime.Cache` is made of).")
    yield from methods("`KubeRayInstall`", KubeRayInstall, "kuberay",
                       "What `await sim.install_kuberay(...)` returns "
                       "(`emu.kuberay.operator.KubeRayInstall`).")


class _OptionRecorder:
    """Stands in for pytest's parser: records what the plugin adds."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def getgroup(self, *args: Any, **kwargs: Any) -> _OptionRecorder:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.append((names, kwargs))


def section_pytest() -> Iterator[str]:
    import emu.pytest_plugin as plugin

    rec = _OptionRecorder()
    plugin.pytest_addoption(rec)  # type: ignore[arg-type]
    yield "## The pytest plugin"
    yield ""
    yield doc(plugin)
    yield ""
    yield "| option | what it does |"
    yield "|---|---|"
    for names, kwargs in rec.options:
        metavar = kwargs.get("metavar") or ("N" if kwargs.get("type") is int else "")
        shown = ", ".join(f"`{n}{' ' + metavar if metavar else ''}`" for n in names)
        yield f"| {shown} | {kwargs.get('help', '')} |"
    yield ""
    yield ("Marker: `@pytest.mark.emu(seed=None, **options)`; the options go to `emu.Simulation` "
           "(for example `cluster=True`).")
    yield ""


def section_cli() -> Iterator[str]:
    from emu.cli import build_parser

    parser = build_parser()
    yield "## The `emu` command"
    yield ""
    yield "```"
    yield parser.format_help().rstrip()
    yield "```"
    yield ""
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        yield f"### `emu {name}`"
        yield ""
        yield "```"
        yield sub.format_help().rstrip()
        yield "```"
        yield ""


SECTIONS: list[Callable[[], Iterator[str]]] = [
    section_emu, section_more_faults, section_runtime, section_methods, section_pytest,
    section_cli,
]


def section_invariants() -> Iterator[str]:
    """``emu.invariants``: the interface and every invariant value (after ``emu.runtime``)."""
    import emu.invariants as invariants

    yield "## `emu.invariants`: KubeRay's invariants, checked on a run"
    yield ""
    yield (doc(invariants).split("\n\n")[0] + " Every name in `emu.invariants.__all__`:")
    yield ""
    for name in sorted(invariants.__all__, key=str.lower):
        obj = getattr(invariants, name)
        text = doc(obj)
        rationale = getattr(obj, "rationale", "")
        if inspect.isclass(obj) and rationale and isinstance(rationale, str):
            text += f"\n\n*{getattr(obj, 'name', name)}*: {rationale}."
        yield entry(f"emu.invariants.{name}", signature(obj, name), text)


SECTIONS.insert(SECTIONS.index(section_runtime) + 1, section_invariants)


def render() -> str:
    """The whole of docs/api.md."""
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        return _render()
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _render() -> str:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    head = [
        "# API reference",
        "",
        f"<!-- Generated by scripts/gen_api_docs.py; do not edit. Regenerate: {COMMAND} -->",
        "",
        "Generated from the code's signatures and docstrings. Start with the "
        "[tutorial](tutorial.md); this page is for looking things up.",
        "",
    ]
    body: list[str] = []
    for section in SECTIONS:
        body.extend(section())
    text = "\n".join(head + body)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/api.md from the public surface.")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when docs/api.md differs from what would be generated")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"docs/api.md is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
