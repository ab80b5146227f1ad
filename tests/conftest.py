"""Shared fixtures: where Cora lives, and a skip with a clear reason when it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def planetoid_dir() -> Path:
    from mixgcn.golden.datasets import default_data_dir

    return default_data_dir()


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


def pytest_runtest_setup(item):
    """Fail a test marked ``xdist_group`` that ``--dist loadgroup`` did not group: two
    workers would then build (or wait for) the same simulator or board at once, each as
    slowly as one, and nothing else would say so."""
    if (getattr(item.config.option, "loadgroup", False)  # only on loadgroup's workers
            and item.get_closest_marker("xdist_group") and "@" not in item.nodeid):
        pytest.fail(f"--dist loadgroup did not group {item.nodeid}: this pytest and "
                    "pytest-xdist do not work together; install the versions "
                    "pyproject.toml pins (make setup)", pytrace=False)
