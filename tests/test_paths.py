"""Where things live does not depend on where the user stands: one build cache, one
default data folder, for the CLI, the tests, the benchmarks and the Makefile."""

from __future__ import annotations

from pathlib import Path

from mixgcn.golden.datasets import default_data_dir
from mixgcn.sim.build import build_root

CHECKOUT = Path(__file__).resolve().parent.parent


def test_build_cache_is_one_place(tmp_path, monkeypatch):
    monkeypatch.delenv("MIXGCN_BUILD", raising=False)
    here = build_root()
    monkeypatch.chdir(tmp_path)
    assert build_root() == here == CHECKOUT / "build"
    monkeypatch.setenv("MIXGCN_BUILD", str(tmp_path / "cache"))
    assert build_root() == tmp_path / "cache"


def test_default_data_dir_is_one_place(tmp_path, monkeypatch):
    monkeypatch.delenv("MIXGCN_DATA", raising=False)
    here = default_data_dir()
    monkeypatch.chdir(tmp_path)
    assert default_data_dir() == here == CHECKOUT.parent / "shared" / "data" / "planetoid"
    monkeypatch.setenv("MIXGCN_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path


def test_the_makefile_has_no_data_default_of_its_own():
    assert "MIXGCN_DATA" not in (CHECKOUT / "Makefile").read_text()
