"""The key order instances are fed in (``tests/key_order.py``) and the pass-rate verdicts.

No engine runs here: ``benchmarks.peers.passrate`` itself needs the peers and the corpus.
"""

from __future__ import annotations

from key_order import declared_order

from benchmarks.peers.passrate import tally, verdict


def test_order_follows_merged_schemas():
    schema = {
        "$defs": {"B": {"properties": {"b2": {}, "b1": {}}, "required": ["b0"]}},
        "properties": {"z": {"properties": {"q": {}, "p": {}}}},
        "required": ["y"],
        "allOf": [{"properties": {"x": {}}, "allOf": [{"properties": {"w": {}}}]}],
        "$ref": "#/$defs/B",
        "anyOf": [{"required": ["absent"]}, {"properties": {"v": {}, "z": {"properties": {"o": {}}}}}],
        "additionalProperties": {"properties": {"n": {}, "m": {}}},
        "patternProperties": {"^pp": {"properties": {"k": {}, "j": {}}}},
    }
    data = {"extra": 1, "v": 1, "b1": 1, "b0": 1, "b2": 1, "w": 1, "x": 1, "y": 1,
            "z": {"r": 1, "o": 1, "p": 1, "q": 1}, "pp": {"j": 1, "k": 1}, "aa": {"m": 1, "n": 1}}  # fmt: skip
    out = declared_order(data, schema)
    assert list(out) == ["z", "x", "w", "b2", "b1", "v", "y", "b0", "extra", "pp", "aa"]
    assert list(out["z"]) == ["q", "p", "o", "r"]  # named in properties, then in the chosen branch
    assert list(out["pp"]) == ["k", "j"]
    assert list(out["aa"]) == ["n", "m"]


def test_order_of_array_items_and_odd_schemas():
    ab, ba = {"properties": {"a": {}, "b": {}}}, {"properties": {"b": {}, "a": {}}}
    data = [{"b": 1, "a": 1}, {"a": 1, "b": 1}]
    for schema in ({"prefixItems": [ab], "items": ba}, {"items": [ab], "additionalItems": ba}):
        assert [list(d) for d in declared_order(data, schema)] == [["a", "b"], ["b", "a"]]
    assert list(declared_order({"b": 1, "a": 1}, {"properties": [], "required": True, "allOf": {}})) == ["b", "a"]
    assert list(declared_order({"b": 1, "a": 1}, {"$ref": "#", "required": ["a"]})) == ["a", "b"]


def test_order_ignores_the_siblings_of_a_legacy_ref():
    """Drafts 4-7 ignore the keywords beside ``$ref`` (so does the compiler): their names are extra keys."""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "$ref": "#/definitions/car",
              "properties": {"track": {}}, "definitions": {"car": {"properties": {"reg": {}}}}}  # fmt: skip
    assert list(declared_order({"track": 1, "reg": 1}, schema)) == ["reg", "track"]
    del schema["$schema"]  # 2019-09 on: the siblings apply, before the target's
    assert list(declared_order({"reg": 1, "track": 1}, schema)) == ["track", "reg"]


def test_verdicts():
    item = {"valid": [True, False, True]}
    passing = verdict(item, {"ok": True, "compile": 0.001, "warned": False, "accepted": [True, False, True],
                             "order_only": []})  # fmt: skip
    unsound = verdict(item, {"ok": True, "compile": 0.001, "warned": True, "accepted": [False, True, True],
                             "order_only": [0]})  # fmt: skip
    refused = verdict(item, {"ok": False, "error": "SchemaError: not", "keyword": "not"})
    timeout = verdict(item, {"ok": False, "error": "timeout: over 10 s in compile"})
    assert [v["status"] for v in (passing, unsound, refused, timeout)] == ["pass", "fail", "refused", "timeout"]
    t = tally([item] * 4, [passing, unsound, refused, timeout])
    assert (t["schemas"], t["pass"], t["compiled"], t["refused"], t["timeout"], t["pass_rate"]) == (4, 1, 2, 1, 1, 0.25)
    assert (t["valid"], t["valid_rejected"], t["order_only"], t["invalid"], t["invalid_accepted"]) == (4, 1, 1, 2, 1)
    assert (t["invalid_accepted_warned"], t["invalid_accepted_unwarned"]) == (1, 0)
