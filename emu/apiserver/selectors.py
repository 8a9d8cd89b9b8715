"""Label and field selectors: parsed once, evaluated against an object's labels and field values.

Parsing follows k8s.io/apimachinery/pkg/labels (``Parse``) and pkg/fields (``ParseSelector``):
equality (``a=b``, ``a==b``, ``a!=b``), set-based (``a in (x,y)``, ``a notin (x)``), existence
(``a``, ``!a``). A parsed `LabelSelector` also says which ``key=value`` pairs every match must
carry (`LabelSelector.index_terms`), so the store can answer from its label index instead of
scanning every object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import BadRequest

_KEY_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIXED_KEY_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_TOKEN_RE = re.compile(r"\s*(==|!=|=|\(|\)|,|!|[^\s=!(),]+)")

EQ, NEQ, IN, NOTIN, EXISTS, NOT_EXISTS = "=", "!=", "in", "notin", "exists", "!"


class Requirement:
    """One clause of a label selector: ``key op values``."""

    __slots__ = ("key", "op", "values")

    def __init__(self, key: str, op: str, values: tuple[str, ...] = ()) -> None:
        self.key = key
        self.op = op
        self.values = values

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == EQ:
            return labels.get(self.key) == self.values[0]
        if op == NEQ:
            return labels.get(self.key) != self.values[0]
        if op == IN:
            return self.key in labels and labels[self.key] in self.values
        if op == NOTIN:
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        return self.key not in labels

    def __repr__(self) -> str:
        return f"Requirement({self.key!r}, {self.op!r}, {self.values!r})"


class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    __slots__ = ("requirements", "text")

    def __init__(self, requirements: list[Requirement], text: str = "") -> None:
        self.requirements = requirements
        self.text = text

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        lab: Mapping[str, str] = labels or {}
        return all(req.matches(lab) for req in self.requirements)

    def index_terms(self) -> list[tuple[str, tuple[str, ...] | None]]:
        """Terms the label index can answer: ``(key, values)`` (the label must hold one of the
        values) or ``(key, None)`` (the label must exist). Every match satisfies all of them."""
        terms: list[tuple[str, tuple[str, ...] | None]] = []
        for req in self.requirements:
            if req.op in (EQ, IN):
                terms.append((req.key, req.values))
            elif req.op == EXISTS:
                terms.append((req.key, None))
        return terms


def _bad(text: str, why: str) -> BadRequest:
    return BadRequest(f'unable to parse requirement: invalid label selector "{text}": {why}')


#: Label keys found valid: a world's selectors use a handful of keys over and over.
_VALID_KEYS: dict[str, None] = {}


def _check_key(text: str, key: str) -> None:
    if key in _VALID_KEYS:
        return
    if len(key.rsplit("/", 1)[-1]) > 63 or not (
        _KEY_RE.match(key) if "/" not in key else _PREFIXED_KEY_RE.match(key)
    ):
        raise _bad(text, f'"{key}" is not a valid label key')
    if len(_VALID_KEYS) < 1024:
        _VALID_KEYS[key] = None


def _check_value(text: str, value: str) -> None:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise _bad(text, f'"{value}" is not a valid label value')


_CACHE: dict[str, LabelSelector] = {}
_CACHE_MAX = 16_384


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector string (``labels.Parse``); raises 400 BadRequest on bad syntax."""
    if not text:
        return LabelSelector([], "")
    cached = _CACHE.get(text)
    if cached is not None:
        return cached
    pos = 0
    tokens: list[str] = []
    stripped = text.rstrip()
    while pos < len(stripped):
        m = _TOKEN_RE.match(stripped, pos)
        if m is None:  # pragma: no cover - the token pattern matches any non-space character
            raise _bad(text, f"unexpected character at {pos}")
        tokens.append(m.group(1))
        pos = m.end()
    reqs: list[Requirement] = []
    i = 0
    n = len(tokens)

    def expect_word(what: str) -> str:
        nonlocal i
        if i >= n or tokens[i] in ("==", "!=", "=", "(", ")", ",", "!"):
            found = tokens[i] if i < n else "end of string"
            raise _bad(text, f"found '{found}', expected: {what}")
        i += 1
        return tokens[i - 1]

    while True:
        if i < n and tokens[i] == "!":
            i += 1
            key = expect_word("identifier")
            _check_key(text, key)
            reqs.append(Requirement(key, NOT_EXISTS))
        else:
            key = expect_word("identifier")
            _check_key(text, key)
            if i >= n or tokens[i] == ",":
                reqs.append(Requirement(key, EXISTS))
            elif tokens[i] in ("=", "==", "!="):
                op = NEQ if tokens[i] == "!=" else EQ
                i += 1
                if i < n and tokens[i] not in (",", "(", ")", "=", "==", "!=", "!"):
                    value = tokens[i]
                    i += 1
                else:
                    value = ""
                _check_value(text, value)
                reqs.append(Requirement(key, op, (value,)))
            elif tokens[i] in ("in", "notin"):
                op = IN if tokens[i] == "in" else NOTIN
                i += 1
                if i >= n or tokens[i] != "(":
                    found = tokens[i] if i < n else "end of string"
                    raise _bad(text, f"found '{found}', expected: '('")
                i += 1
                values: list[str] = []
                while True:
                    if i < n and tokens[i] == ")":
                        i += 1
                        break
                    value = expect_word("value")
                    _check_value(text, value)
                    values.append(value)
                    if i < n and tokens[i] == ",":
                        i += 1
                        continue
                    if i < n and tokens[i] == ")":
                        i += 1
                        break
                    found = tokens[i] if i < n else "end of string"
                    raise _bad(text, f"found '{found}', expected: ',' or ')'")
                if not values:
                    raise _bad(text, "for 'in', 'notin' operators, values set can't be empty")
                reqs.append(Requirement(key, op, tuple(values)))
            else:
                raise _bad(text, f"found '{tokens[i]}', expected: '=', '!=', '==', 'in', notin'")
        if i >= n:
            break
        if tokens[i] != ",":
            raise _bad(text, f"found '{tokens[i]}', expected: ','")
        i += 1
    sel = LabelSelector(reqs, text)
    if len(_CACHE) >= _CACHE_MAX:
        # Start over rather than stop caching: a controller reconciling cluster after cluster
        # lists with each cluster's own selectors several times in a row, so recent ones are
        # what pays (with 1,000 clusters and more, a cache that stopped at 4,096 parsed again on
        # nearly every list).
        _CACHE.clear()
    _CACHE[text] = sel
    return sel


def selector_from_dict(spec: Mapping[str, Any] | None) -> LabelSelector:
    """A `LabelSelector` from a ``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``),
    as ``metav1.LabelSelectorAsSelector`` builds it. ``None`` or ``{}`` matches everything."""
    if not spec:
        return LabelSelector([], "")
    reqs: list[Requirement] = []
    for key, value in sorted((spec.get("matchLabels") or {}).items()):
        reqs.append(Requirement(key, EQ, (value,)))
    for expr in spec.get("matchExpressions") or []:
        op = expr.get("operator")
        key = expr.get("key", "")
        vals = tuple(expr.get("values") or ())
        if op == "In":
            reqs.append(Requirement(key, IN, vals))
        elif op == "NotIn":
            reqs.append(Requirement(key, NOTIN, vals))
        elif op == "Exists":
            reqs.append(Requirement(key, EXISTS))
        elif op == "DoesNotExist":
            reqs.append(Requirement(key, NOT_EXISTS))
        else:
            raise BadRequest(f'"{op}" is not a valid label selector operator')
    return LabelSelector(reqs, "")


class FieldSelector:
    """A conjunction of ``field op value`` terms over an object's supported field values."""

    __slots__ = ("terms", "text")

    def __init__(self, terms: list[tuple[str, bool, str]], text: str = "") -> None:
        self.terms = terms  # (field, equal?, value)
        self.text = text

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all((fields.get(f, "") == value) is equal for f, equal, value in self.terms)

    def value_for(self, field: str) -> str | None:
        """The value an ``=`` term requires for ``field``, if any (for index lookups)."""
        for f, equal, value in self.terms:
            if f == field and equal:
                return value
        return None


def parse_field_selector(text: str | None, supported: Mapping[str, Any] | frozenset[str]
                         ) -> FieldSelector:
    """Parse a field selector (``fields.ParseSelector``) and check every field is supported for
    the kind; an unknown field is 400 ``field label not supported: <field>`` as kube says."""
    if not text:
        return FieldSelector([], "")
    terms: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            field, value = part.split("!=", 1)
            equal = False
        elif "==" in part:
            field, value = part.split("==", 1)
            equal = True
        elif "=" in part:
            field, value = part.split("=", 1)
            equal = True
        else:
            raise BadRequest(f'invalid field selector: "{part}": expected an operator (=, ==, !=)')
        field = field.strip()
        if field not in supported:
            raise BadRequest(f"field label not supported: {field}")
        terms.append((field, equal, value.strip()))
    return FieldSelector(terms, text)
