"""Label and field selector parsing and matching."""

from __future__ import annotations

import pytest

from emu.apiserver.errors import ApiError
from emu.apiserver.selectors import (
    parse_field_selector,
    parse_label_selector,
    selector_from_dict,
)


@pytest.mark.parametrize(("text", "labels", "expected"), [
    ("a=b", {"a": "b"}, True),
    ("a=b", {"a": "c"}, False),
    ("a!=b", {}, True),
    ("a in (x, y)", {"a": "y"}, True),
    ("a notin (x,y)", {"a": "x"}, False),
    ("a,!b", {"a": ""}, True),
    ("a,!b", {"a": "", "b": "1"}, False),
    ("example.com/role=head", {"example.com/role": "head"}, True),
    ("a=", {"a": ""}, True),
    (" a = b , c ", {"a": "b", "c": "1"}, True),
])
def test_label_selector_matches(text, labels, expected):
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(("text", "why"), [
    ("a in x", "found 'x', expected: '('"),
    ("a in ()", "for 'in', 'notin' operators, values set can't be empty"),
    ("=b", "found '=', expected: identifier"),
    ("a b", "found 'b', expected: '=', '!=', '==', 'in', notin'"),
    ("a=b c", "found 'c', expected: ','"),
    ("a=b,", "found 'end of string', expected: identifier"),
    ("bad key!=x", "found 'key', expected: '=', '!=', '==', 'in', notin'"),
    ("a=b@d", "\"b@d\" is not a valid label value"),
])
def test_label_selector_parse_errors_are_400_with_the_reason(text, why):
    with pytest.raises(ApiError) as err:
        parse_label_selector(text)
    assert err.value.code == 400
    assert err.value.message == (f'unable to parse requirement: invalid label selector '
                                 f'"{text}": {why}')


def test_empty_selector_matches_everything():
    sel = parse_label_selector("")
    assert sel.empty and sel.matches(None) and sel.matches({"x": "y"})


def test_index_terms_are_the_positive_requirements():
    sel = parse_label_selector("a=1,b in (2,3),c,!d,e!=4")
    assert sel.index_terms() == [("a", ("1",)), ("b", ("2", "3")), ("c", None)]


def test_selector_from_dict_supports_match_labels_and_expressions():
    sel = selector_from_dict({"matchLabels": {"app": "x"}, "matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["db"]},
        {"key": "gpu", "operator": "DoesNotExist"}]})
    assert sel.matches({"app": "x", "tier": "web"})
    assert not sel.matches({"app": "x", "tier": "db"})
    assert not sel.matches({"app": "x", "gpu": "1"})
    with pytest.raises(ApiError):
        selector_from_dict({"matchExpressions": [{"key": "a", "operator": "Near"}]})


def test_field_selector_parses_operators_and_checks_support():
    sel = parse_field_selector("status.phase=Running,spec.nodeName!=n1",
                               frozenset({"status.phase", "spec.nodeName"}))
    assert sel.matches({"status.phase": "Running", "spec.nodeName": "n2"})
    assert not sel.matches({"status.phase": "Running", "spec.nodeName": "n1"})
    assert sel.value_for("status.phase") == "Running"
    with pytest.raises(ApiError) as err:
        parse_field_selector("foo=bar", frozenset())
    assert err.value.message == "field label not supported: foo"
    with pytest.raises(ApiError) as err:
        parse_field_selector("foo", frozenset({"foo"}))
    assert err.value.message == 'invalid field selector: "foo": expected an operator (=, ==, !=)'
