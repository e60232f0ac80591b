"""Shared fixtures: the third-party corpora in ../shared/testdata and the real vocabularies."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTDATA = Path(__file__).resolve().parents[2] / "shared" / "testdata"


def corpus(*parts: str) -> Path:
    """A folder or file of ../shared/testdata; the calling test skips, with the reason, where absent."""
    path = TESTDATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"corpus {path} is absent (../shared/testdata is not beside this checkout)")
    return path
