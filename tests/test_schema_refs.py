"""``$ref`` resolution shortcuts (llamay/grammars/jsonschema/refs.py) agree with the URL library they skip."""

from __future__ import annotations

import random
from urllib.parse import urldefrag, urljoin

import pytest

from llamay.grammars.json_lexical import dumps
from llamay.grammars.jsonschema.refs import _DOCUMENT, _split, declares_ids, one_base

_REFS = ["#", "#/", "#/$defs/a", "#/definitions/a b", "#/a#b", "#/%25/~0~1", "#/é/\u2028", "#a\tb", "#/a\nb", "#\r"]


@pytest.mark.parametrize("ref", _REFS)
@pytest.mark.parametrize("base", [_DOCUMENT, "http://x/a.json", "HTTP://x/a.json?q=1"])
def test_split_is_urldefrag_of_urljoin(ref, base):
    assert _split(ref, base) == tuple(urldefrag(urljoin(base, ref)))


def test_split_on_random_fragments():
    rng = random.Random(0)  # seed 0
    alphabet = "ab/~0%#?;:@&=+$,!*()[] \x00\x7f\u00e9\u2028\t\r\n"
    for _ in range(5000):
        ref = "#" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        assert _split(ref, _DOCUMENT) == tuple(urldefrag(urljoin(_DOCUMENT, ref))), ref


@pytest.mark.parametrize(
    ("schema", "declared"),
    [
        ({"$id": "http://x/a.json"}, True),
        ({"properties": {"id": {"type": "string"}}}, False),  # a property named "id" is no identifier
        ({"$defs": {"a": {"id": "#a"}}}, True),  # draft 4 anchor
        ({"$defs": {"a": {"$anchor": "a"}}}, True),
        ({"description": '"$id":"'}, False),  # escaped quotes inside a string
        ({'x"$id': "v"}, True),  # a key that only ends like one: a safe yes
        ({"$ref": "#/$defs/a", "$defs": {"a": {}}}, False),
    ],
)
def test_declares_ids(schema, declared):
    assert declares_ids(dumps(schema)) is declared


@pytest.mark.parametrize(
    ("schema", "one"),
    [
        ({"properties": {"a": {}}}, True),
        ({"$id": "http://x/a.json", "properties": {"a": {}}}, True),  # the root's own base
        ({"$id": "http://x/a.json", "properties": {"a": {"$id": "b.json"}}}, False),
        ({"properties": {"a": {"id": "http://x/b.json"}}}, False),  # draft 4 spelling
        ({"$defs": {"a": {"$anchor": "a"}}}, True),  # an anchor names a node, it moves no base
        ({"enum": [{"id": "x"}]}, False),  # looks like one: a cautious no
    ],
)
def test_one_base(schema, one):
    assert one_base(dumps(schema), schema) is one
