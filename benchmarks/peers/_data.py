"""MaskBench schemas and their valid instances, as the peer harness feeds them.

Each instance is written compactly (``separators=(",", ":")``, raw UTF-8) with its keys in the
order llamay's compiler generates them (``tests.key_order.declared_order``), since every engine
here emits declared properties in declared order.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from tests.feed import compact
from tests.key_order import declared_order

REPO = Path(__file__).resolve().parents[2]
MASKBENCH = REPO.parent / "shared" / "testdata" / "jsonschemabench"


def all_subsets(root: Path = MASKBENCH) -> list[str]:
    """Every subset of the corpus, by name: what ``--subsets all`` means."""
    return sorted(p.name.removesuffix(".jsonl.gz") for p in root.glob("*.jsonl.gz"))


def load_subset(name: str, root: Path = MASKBENCH) -> list[dict]:
    path = root / f"{name}.jsonl.gz"
    if not path.exists():
        raise FileNotFoundError(f"{path} is absent (../shared/testdata is not beside this checkout)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def select_schemas(
    subsets, limit: int | None, seed: int = 0, root: Path = MASKBENCH, with_instances: bool = False, keep=None
):
    """``limit`` schemas in all (None: every one), stratified over ``subsets``, drawn with ``random.Random(seed)``.

    The shares are equal (the first ``limit % len(subsets)`` subsets one more); a subset with fewer
    records than its share gives all it has, and what it could not give goes to the others in turn.
    Only records with a valid instance when ``with_instances``; only those ``keep(record)`` is true of.
    """
    pools = {}
    for name in subsets:
        records = load_subset(name, root)
        if with_instances:
            records = [r for r in records if any(t["valid"] for t in r["tests"])]
        if keep is not None:
            records = [r for r in records if keep(r)]
        pools[name] = records
    if limit is None:
        return [r for name in subsets for r in pools[name]]
    shares = dict.fromkeys(subsets, 0)
    left = limit
    while left > 0:
        open_ = [name for name in subsets if shares[name] < len(pools[name])]
        if not open_:
            break
        for name in open_[:left]:
            shares[name] += 1
            left -= 1
    chosen = []
    for name in subsets:
        records = pools[name]
        chosen += random.Random(f"{seed}:{name}").sample(records, shares[name]) if shares[name] < len(records) \
            else records
    return chosen


def valid_texts(record: dict) -> list[str]:
    return [instance_text(t["data"], record["schema"]) for t in record["tests"] if t["valid"]]


def instance_text(data, schema=None) -> str:
    """``data`` compact, keys in the compiler's order for ``schema`` (``tests.key_order.declared_order``).

    Without a schema the keys stay in the instance's own order. A ``str``: a lone surrogate stays
    one, as the instance holds it (``.encode("utf-8", "surrogatepass")`` gives the bytes fed).
    """
    ordered = data if schema is None else declared_order(data, schema)
    return compact(ordered).decode("utf-8", "surrogatepass")
