"""Equal JSON values as equal small ints, each node keyed once (hash-consing).

The schema compiler shares one rule among equal subschemas (``_Compiler.flat``). Keyed by its
serialized text, a subschema cost its whole subtree, and a repeat nested in repeats was
serialized again at every level above it: a tenth of the corpus sample's compile time, a
quarter of a bundled schema's. Here a node's key is made of its children's keys, so each node
is keyed once.
"""

from __future__ import annotations


class StructureKeys:
    """``key(value)``: the same int for values whose JSON texts are equal (and only for those).

    Stricter than the text in one way only: a value that is not JSON (a merged ``multipleOf``
    may be a Decimal) is keyed by its type as well as its text.
    """

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}
        # id(node) -> (node, its key): holding the node keeps its id from being reused by another
        self._seen: dict[int, tuple[object, int]] = {}

    def key(self, value) -> int:
        seen = self._seen.get(id(value))
        if seen is not None:
            return seen[1]
        if isinstance(value, dict):
            parts: tuple = ("{", *[part for name, item in value.items() for part in (name, self.part(item))])
        elif isinstance(value, (list, tuple)):
            parts = ("[", *[self.part(item) for item in value])
        elif isinstance(value, str):
            parts = ("s", value)
        elif value is None or isinstance(value, bool):  # before int: True is an int
            parts = ("c", value)
        elif isinstance(value, int):
            parts = ("i", value)
        elif isinstance(value, float):
            parts = ("f", repr(value))  # 1.0 is not 1, -0.0 is not 0.0, as in the text
        else:
            parts = ("o", type(value).__qualname__, str(value))
        key = self._ids.setdefault(parts, len(self._ids))
        self._seen[id(value)] = (value, key)
        return key

    def part(self, item):
        """A member's place in its container's key: a string stands for itself, anything else by its key.

        Most members are strings (types, names, descriptions); each keyed on its own cost a
        tuple, a table entry and a memo entry. Unambiguous: every other part is an int.
        """
        return item if type(item) is str else self.key(item)
