"""Shared fixtures: where Cora lives, and a skip with a clear reason when it does not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def planetoid_dir() -> Path:
    env = os.environ.get("MIXGCN_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data" / "planetoid"


@pytest.fixture(scope="session")
def cora_dir() -> Path:
    d = planetoid_dir()
    if not (d / "ind.cora.graph").is_file():
        pytest.skip(f"Cora not found in {d} (set MIXGCN_DATA to the Planetoid folder)")
    return d


@pytest.fixture(scope="session")
def cora(cora_dir):
    from mixgcn.golden.datasets import load_planetoid

    return load_planetoid("cora", cora_dir)
