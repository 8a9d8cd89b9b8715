"""CRD structural schemas enforced as kube-apiserver does: types, required, enums, formats,
int-or-string, min/max, pruning, defaulting, nulls, x-kubernetes-validations (CEL) — for an
applied CRD and for the built-in ray.io kinds."""

from __future__ import annotations

import pytest

import emu
from emu.apiserver.errors import ApiError

WIDGET_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "port": {"x-kubernetes-int-or-string": True},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "mode": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "mode is immutable"}]},
                "limits": {"type": "object", "properties": {
                    "low": {"type": "integer"}, "high": {"type": "integer"}},
                    "x-kubernetes-validations": [
                        {"rule": "!has(self.low) || !has(self.high) || self.low <= self.high",
                         "message": "low must not exceed high"}]},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"kind": "Widget", "plural": "widgets"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": WIDGET_SCHEMA}}]},
}


def widget(**spec):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": spec}


def run(*manifests, update=None, validation="Strict"):
    async def main(sim):
        await sim.apply(CRD)
        out = None
        for m in manifests:
            out = await sim.apply(m, field_validation=validation)
        if update is not None:
            out = await sim.apply(update, field_validation=validation)
        return out

    return emu.run(main)


def refused(*manifests, update=None):
    with pytest.raises(ApiError) as err:
        run(*manifests, update=update)
    assert err.value.code == 422, err.value
    return [(c.get("field"), c.get("message")) for c in
            (err.value.status.get("details") or {}).get("causes") or []]


def test_prunes_unknown_fields_drops_nulls_and_applies_defaults():
    stored = run(widget(size=3, bogus=1, name=None, extra={"free": {"form": 1}},
                        labels={"a": "b"}), validation="Ignore")
    assert stored["spec"] == {"size": 3, "color": "red", "extra": {"free": {"form": 1}},
                              "labels": {"a": "b"}}


def test_strict_field_validation_names_every_pruned_field_sorted_as_kube_does():
    with pytest.raises(ApiError) as err:
        run({**widget(size=3, zeta=1, limits={"low": 1, "hi": 2}, extra={"free": 1},
                      labels={"any": "key"}, name=None), "spek": {}})
    assert err.value.code == 400
    assert str(err.value) == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
        'unknown field "spec.limits.hi", unknown field "spec.zeta", unknown field "spek"')


def test_wrong_type_is_kube_apiservers_422():
    assert refused(widget(size="two")) == [
        ("spec.size", 'Invalid value: "string": spec.size in body must be of type integer: '
                      '"string"')]


def test_missing_required_field():
    assert refused(widget(color="blue")) == [("spec.size", "Required value")]


def test_enum_min_max_pattern_lengths_and_items():
    causes = refused(widget(size=11, color="green", name="ABCDEFGHIJ", tags=["a", "b", "c"]))
    assert ("spec.color", 'Unsupported value: "green": supported values: "red", "blue"') \
        in causes
    assert ("spec.size", "Invalid value: 11: spec.size in body should be less than or equal "
                         "to 10") in causes
    assert ("spec.name", "Too long: may not be more than 8 bytes") in causes
    assert ("spec.name", 'Invalid value: "ABCDEFGHIJ": spec.name in body should match '
                         "'^[a-z]+$'") in causes
    assert ("spec.tags", "Too many: 3: must have at most 2 items") in causes


def test_int_or_string_accepts_both_and_refuses_others():
    assert run(widget(size=1, port=8080))["spec"]["port"] == 8080
    assert run(widget(size=1, port="http"))["spec"]["port"] == "http"
    assert refused(widget(size=1, port=True)) == [
        ("spec.port", 'Invalid value: "boolean": spec.port in body must be of type '
                      'integer,string: "boolean"')]


def test_int32_format_range():
    causes = refused(widget(size=2**31))
    assert ("spec.size", "Invalid value: 2147483648: spec.size in body must be of type int32: "
                         "2147483648") in causes


def test_cel_rules_and_transition_rules():
    assert refused(widget(size=1, limits={"low": 5, "high": 1})) == [
        ("spec.limits", 'Invalid value: "object": low must not exceed high')]
    assert run(widget(size=1, mode="a"), update=widget(size=2, mode="a"))["spec"]["size"] == 2
    assert refused(widget(size=1, mode="a"), update=widget(size=1, mode="b")) == [
        ("spec.mode", 'Invalid value: "b": mode is immutable')]


def test_a_crd_with_a_broken_schema_is_refused_and_serves_nothing():
    bad = {**CRD, "spec": {**CRD["spec"], "versions": [
        {"name": "v1", "served": True, "storage": True,
         "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
             "type": "no-such-type"}}}}}]}}

    async def main(sim):
        with pytest.raises(ApiError) as err:
            await sim.apply(bad)
        with pytest.raises(ApiError) as missing:
            await sim.apply(widget(size=1))
        return err.value, missing.value

    err, missing = emu.run(main)
    assert err.code == 422 and "openAPIV3Schema" in str(err)
    assert missing.code == 404


def test_builtin_raycluster_is_validated_with_its_derived_schema():
    async def main(sim):
        head = {"template": {"spec": {"containers": [{"name": "h", "image": "rayproject/ray"}]}}}
        worker = {"groupName": "w", "replicas": "two", "template": head["template"]}
        with pytest.raises(ApiError) as err:
            await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                             "metadata": {"name": "rc"},
                             "spec": {"headGroupSpec": head, "workerGroupSpecs": [worker]}})
        with pytest.raises(ApiError) as no_head:
            await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                             "metadata": {"name": "rc"}, "spec": {}})
        ok = await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                              "metadata": {"name": "rc"},
                              "spec": {"headGroupSpec": {**head, "template": {
                                  **head["template"], "metadata": None}},
                                       "workerGroupSpecs": [{**worker, "replicas": 1}],
                                       "typo": True}}, field_validation="Warn")
        return err.value, no_head.value, ok

    err, no_head, ok = emu.run(main)
    assert err.code == 422
    assert 'spec.workerGroupSpecs[0].replicas: Invalid value: "string"' in str(err)
    assert "spec.headGroupSpec: Required value" in str(no_head)
    assert "typo" not in ok["spec"]
    assert "metadata" not in ok["spec"]["headGroupSpec"]["template"]
    assert ok["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 2147483647


def test_rayjob_deletion_strategy_cel_rule():
    async def main(sim):
        with pytest.raises(ApiError) as err:
            await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayJob",
                             "metadata": {"name": "rj"},
                             "spec": {"entrypoint": "python x.py",
                                      "deletionStrategy": {"onSuccess": {"policy": "DeleteSelf"}}}})
        return err.value

    err = emu.run(main)
    assert "deletionStrategy requires either BOTH onSuccess and onFailure" in str(err)


def test_applying_a_ray_crd_replaces_the_builtin_kind_with_its_schema():
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "rayclusters.ray.io"},
        "spec": {"group": "ray.io", "scope": "Namespaced",
                 "names": {"kind": "RayCluster", "plural": "rayclusters"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "rayVersion": {"type": "string",
                                                      "default": "from-the-crd"},
                                       "suspend": {"type": "boolean"}}},
                                   "status": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}}}]},
    }

    async def main(sim):
        await sim.client("kubectl").create(crd)
        rc = await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                              "metadata": {"name": "rc"}, "spec": {"suspend": False}})
        with pytest.raises(ApiError) as err:
            await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                             "metadata": {"name": "rc2"}, "spec": {"suspend": "no"}})
        return rc, err.value

    rc, err = emu.run(main)
    assert rc["spec"] == {"rayVersion": "from-the-crd", "suspend": False}
    assert err.code == 422 and "spec.suspend" in str(err)


def test_a_body_validated_again_gets_the_same_answer_from_the_schemas_cache():
    from emu.apiserver.schema import compile_schema

    schema = compile_schema({"type": "object", "properties": {"spec": {
        "type": "object", "required": ["size"],
        "properties": {"size": {"type": "integer", "maximum": 5}}}}})
    bad = {"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"}, "spec": {"size": 9}}
    first = schema.validate(bad)
    assert first and schema.validate({**bad, "metadata": {"name": "b"}}) == first  # a hit
    assert schema.validate({**bad, "spec": {"size": 2}}) == []                      # a miss, valid
    assert schema.validate({**bad, "spec": {"size": 2**70}}) != []                  # not cacheable


def _mutants(base, rng, count):
    """``count`` copies of ``base``, each with one to four random edits (a wrong type, a null,
    a removed or an added key, a list or a map where a scalar was)."""
    import copy

    values = ["x", "", 5, 0, -3, 2**40, 1.5, True, None, [], {}, ["a", 1], {"a": 1},
              {"groupName": 1}, [{"replicas": "2"}]]

    def spots(node, path):
        yield path
        if isinstance(node, dict):
            for k, v in node.items():
                yield from spots(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from spots(v, (*path, i))

    for _ in range(count):
        obj = copy.deepcopy(base)
        for _ in range(rng.randint(1, 4)):
            path = rng.choice(list(spots(obj, ()))[1:])
            parent = obj
            for part in path[:-1]:
                parent = parent[part]
            last = path[-1]
            what = rng.random()
            if what < 0.15 and isinstance(parent, dict):
                del parent[last]
            elif what < 0.3 and isinstance(parent, dict):
                parent[f"extra{rng.randint(0, 3)}"] = rng.choice(values)
            else:
                parent[last] = copy.deepcopy(rng.choice(values))
        yield obj


#: A schema with what the node walk hands to jsonschema whole (anyOf, oneOf) or checks on the
#: node itself (additionalProperties false, uniqueItems, required).
COMBINATORS = {"type": "object", "properties": {"spec": {
    "type": "object", "additionalProperties": False, "required": ["a"], "properties": {
        "a": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^x"}]},
        "b": {"type": "array", "maxItems": 3, "uniqueItems": True, "items": {
            "type": "object", "required": ["n"],
            "properties": {"n": {"type": "integer", "minimum": 0}}}},
        "c": {"oneOf": [{"type": "object", "properties": {"k": {"type": "string"}}},
                        {"type": "null"}]},
        "d": {"type": "object", "additionalProperties": {"type": "integer"}}}}}}


@pytest.mark.parametrize("kind", ["Widget", "Combinators", "RayCluster", "RayJob",
                                  "RayService"])
def test_node_by_node_validation_finds_what_one_walk_finds(kind):
    """Validation node by node (each subtree's errors remembered by its JSON) gives the causes,
    in the order, that one jsonschema walk of the whole body gives, on hundreds of mutants."""
    import random

    from emu.apiserver.rayschemas import RAY_SCHEMAS
    from emu.apiserver.schema import StructuralSchema

    worker = {"groupName": "small", "replicas": 1, "minReplicas": 0, "maxReplicas": 10,
              "rayStartParams": {}, "template": {"spec": {"containers": [
                  {"name": "w", "image": "rayproject/ray:2.9.0"}]}}}
    cluster = {"rayVersion": "2.9.0", "headGroupSpec": {
        "rayStartParams": {"dashboard-host": "0.0.0.0"},
        "template": {"spec": {"containers": [{"name": "h", "image": "rayproject/ray"}]}}},
        "workerGroupSpecs": [worker, {**worker, "groupName": "big"}]}
    specs = {
        "Widget": {"size": 3, "color": "red", "port": 80, "name": "ab", "tags": ["a"],
                   "labels": {"a": "b"}, "limits": {"low": 1, "high": 2}},
        "RayCluster": cluster,
        "RayJob": {"entrypoint": "python x.py", "rayClusterSpec": cluster,
                   "shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 10},
        "RayService": {"rayClusterConfig": cluster, "serveConfigV2": "applications: []"},
        "Combinators": {"a": 1, "b": [{"n": 1}, {"n": 2}], "c": {"k": "v"}, "d": {"x": 1}},
    }
    schema = StructuralSchema({"Widget": WIDGET_SCHEMA, "Combinators": COMBINATORS}.get(
        kind) or RAY_SCHEMAS[kind])
    base = {"apiVersion": "x/v1", "kind": kind, "spec": specs[kind]}
    rng = random.Random(f"split-{kind}")
    differing = 0
    for body in _mutants(base, rng, 300):
        whole = schema._whole_causes(body)
        assert schema._split_causes(body) == whole, body
        differing += bool(whole)
    assert differing > 100  # most mutants are refused: the comparison is not vacuous


def test_rules_below_lists_and_maps_are_found_and_rule_free_subtrees_skipped():
    """The CEL walk skips subtrees whose schema has no rule and no ranged format, and still
    reaches one under a list's items or a map's additionalProperties."""
    from emu.apiserver.schema import StructuralSchema

    schema = StructuralSchema({"type": "object", "properties": {
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "list": {"type": "array", "items": {"type": "object", "properties": {
            "n": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "self < 5", "message": "n must be under 5"}]}}}},
        "map": {"type": "object", "additionalProperties": {"type": "integer",
                                                           "format": "int32"}}}})
    causes = schema.validate({"free": {"n": 9}, "list": [{"n": 1}, {"n": 7}],
                              "map": {"a": 1, "b": 2**40}})
    assert [(c.field, c.message) for c in causes] == [
        ("list[1].n", "Invalid value: 7: n must be under 5"),
        ("map.b", f"Invalid value: {2**40}: map.b in body must be of type int32: {2**40}")]
    assert schema._rules_below[id(schema.openapi["properties"]["free"])] is False


def test_deleting_a_crd_stops_serving_its_kind_and_deletes_its_objects():
    # kube: the CRD's cleanup finalizer deletes its custom resources, then the kind leaves
    # discovery and requests for it get 404 (the official client's dynamic e2e test checks it)
    async def main(sim):
        kubectl = sim.client("kubectl")
        await sim.apply(CRD)
        rv = (await sim.apply(widget(size=2)))["metadata"]["resourceVersion"]
        events = []
        watch = await kubectl.watch("Widget", namespace="default", resource_version=rv,
                                    api_version="example.com/v1")
        await kubectl.delete("CustomResourceDefinition", "widgets.example.com")
        async for ev in watch:
            events.append((ev["type"], ev["object"]["metadata"]["name"]))
            break
        served = [i.kind for i in sim.api.kinds.all() if i.group == "example.com"]
        with pytest.raises(ApiError) as err:
            await kubectl.get("Widget", "w", namespace="default", api_version="example.com/v1")
        await sim.apply(CRD)  # created again: served again, empty
        again = await kubectl.list("Widget", namespace="default", api_version="example.com/v1")
        return events, served, err.value, again

    events, served, err, again = emu.run(main)
    assert events == [("DELETED", "w")]
    assert served == []
    assert err.code == 404
    assert list(again) == []


def test_deleting_a_ray_crd_keeps_the_builtin_kind_served():
    async def main(sim):
        kubectl = sim.client("kubectl")
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "rayclusters.ray.io"},
               "spec": {"group": "ray.io", "scope": "Namespaced",
                        "names": {"kind": "RayCluster", "plural": "rayclusters"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {
                                          "type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}
        await kubectl.create(crd)
        await kubectl.delete("CustomResourceDefinition", "rayclusters.ray.io")
        return sim.api.kinds.get("ray.io", "RayCluster")

    from emu.apiserver.kinds import builtin_info
    assert emu.run(main) is builtin_info("ray.io", "RayCluster")
