"""Local ``$ref`` resolution: JSON Pointers, anchors and embedded ``$id`` base URIs.

A schema arrives as one document. References into it are resolved; anything that would
need another document (a remote URL, a file) is refused by name, as is ``$dynamicRef``:
llamay never fetches. Base URIs follow RFC 3986 joins from ``$id`` (``id`` in draft 4), so
``{"$id": "http://x/a.json", ... "$ref": "a.json#/$defs/b"}`` stays inside the document.
"""

from __future__ import annotations

from urllib.parse import unquote, urldefrag, urljoin

from ...errors import SchemaError

#: The base URI of a document that declares none (never fetched; it only anchors joins).
_DOCUMENT = "https://llamay.invalid/schema.json"


class Resolver:
    """Every ``$id`` and anchor of one document, and the base URI of each of its subschemas.

    The document is indexed when the first ``$ref`` is resolved (most schemas have none), and
    only where it ``declares_ids``: without an ``$id`` or an anchor, every base is the document's.
    """

    def __init__(self, root, legacy: bool, ids: bool = True) -> None:
        self.root = root
        self.legacy = legacy  # drafts 4-7: an "$id" beside "$ref" is ignored like every sibling
        self.documents: dict[str, object] = {_DOCUMENT: root}
        self.anchors: dict[tuple[str, str], object] = {}
        self.bases: dict[int, str] = {}
        self.targets: dict[tuple[str, str], object] = {}  # (ref, base) -> resolved subschema
        self.indexed = not ids

    def _index_once(self) -> None:
        if not self.indexed:
            self.indexed = True
            self._index(self.root, _DOCUMENT, 0)

    def _index(self, node, base: str, depth: int) -> None:
        if depth > 512:  # the checker bounds depth with a clear error; this only keeps indexing finite
            return
        if isinstance(node, list):
            for item in node:
                self._index(item, base, depth + 1)
            return
        if not isinstance(node, dict):
            return
        ident = node.get("$id", node.get("id"))
        if isinstance(ident, str) and not (self.legacy and "$ref" in node):
            url, fragment = urldefrag(urljoin(base, ident))
            if url:
                base = url
                self.documents.setdefault(url, node)
            if fragment:  # draft 4-7: "id": "#name" is an anchor
                self.anchors.setdefault((base, fragment), node)
        anchor = node.get("$anchor")
        if isinstance(anchor, str):
            self.anchors.setdefault((base, anchor), node)
        self.bases.setdefault(id(node), base)
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples") and isinstance(value, (dict, list)):
                self._index(value, base, depth + 1)

    def base_of(self, node) -> str:
        self._index_once()
        return self.bases.get(id(node), _DOCUMENT)

    def resolve(self, ref: str, base: str, pointer: str):
        """The subschema ``ref`` names, read from ``base``; refuses what is outside the document.

        Memoized: both passes resolve each ``$ref`` every time they meet it, and URL joins are slow.
        """
        key = (ref, base)
        if key not in self.targets:
            self.targets[key] = self._resolve(ref, base, pointer)
        return self.targets[key]

    def _resolve(self, ref: str, base: str, pointer: str):
        self._index_once()
        url, fragment = _split(ref, base)
        document = self.documents.get(url)
        if document is None:
            message = f"$ref {ref!r} points outside the schema (remote references are not fetched)"
            raise SchemaError(message, keyword="$ref", pointer=pointer)
        if not fragment.startswith("/") and fragment:
            target = self.anchors.get((url, fragment))
            if target is None:
                raise SchemaError(f"$ref {ref!r} names no anchor of the schema", keyword="$ref", pointer=pointer)
            return target
        node = pointer_target(document, fragment)
        if node is None:
            raise SchemaError(f"$ref {ref!r} points at nothing in the schema", keyword="$ref", pointer=pointer)
        return node


def _split(ref: str, base: str) -> tuple[str, str]:
    """``urldefrag(urljoin(base, ref))``: a fragment of the document itself needs no URL parsing.

    Parsing drops tab, CR and LF anywhere in a URL, so a reference holding one goes the long way.
    """
    if base == _DOCUMENT and ref.startswith("#") and not any(c in ref for c in "\t\r\n"):
        return _DOCUMENT, ref[1:]
    url, fragment = urldefrag(urljoin(base, ref))
    return url, fragment


def declares_ids(source: str) -> bool:
    """Whether a document, serialized by ``json_lexical.dumps``, may set ``$id``, ``id`` or ``$anchor``.

    A key set to a string is written ``"key":"`` in that compact form, so a ``False`` is certain;
    scanning the text is much faster than walking the document.
    """
    if 'id":"' in source:  # one scan for both spellings of an id, in the usual case of neither
        return '"$id":"' in source or '"id":"' in source or '"$anchor":"' in source
    return '"$anchor":"' in source


def one_base(source: str, root) -> bool:
    """Whether every subschema of a document (serialized as for ``declares_ids``) has the root's base URI.

    Only an ``$id`` (``id`` in draft 4) below the root moves a base; an anchor names a node
    without moving one. A string-valued ``id`` key anywhere else (in an ``enum``, say) only
    makes the answer a cautious ``False``.
    """
    declared = source.count('"$id":"') + source.count('"id":"')
    at_root = isinstance(root, dict) and isinstance(root.get("$id", root.get("id")), str)
    return declared == at_root


def pointer_target(document, fragment: str):
    """The value a JSON Pointer fragment (``/a/0``, percent-encoded) names in ``document``; ``None``: nothing."""
    node = document
    for token in unquote(fragment).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node
