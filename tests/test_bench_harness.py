"""The benchmark path end to end on small engines: memory-fed harnesses, golden check
of every output row (a wrong answer fails the run), figures that add up."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mixgcn.gen.config import DCE_PRESETS, SAE_PRESETS
from mixgcn.host.bench import _run_harness
from mixgcn.sim.harness import Harness, dce_feed, sae_feed


@pytest.mark.sim
def test_dce_harness_small():
    cfg = DCE_PRESETS["tiny"]
    cases = [dict(op="xw", n=50, k=7, m=3), dict(op="xwt", n=20, k=5, m=2),
             dict(op="xtg", n=40, k=2, m=3)]
    results = _run_harness("dce", Harness([dce_feed(cfg, 64)]), cfg, cases,
                           dict(MIXGCN_HARNESS_DEPTH="64"))
    assert [r["op"] for r in results] == ["xw", "xwt", "xtg"]
    for r in results:
        assert r["verified"]
        assert r["cycles"] >= r["ideal_cycles"] > 0
        assert r["busy_cycles"] + r["starved_cycles"] + r["blocked_cycles"] > 0
    # 50 rows of 4 chunks each: the steady state dominates
    assert results[0]["cycles"] < results[0]["steady_cycles"] + 7 + 20


@pytest.mark.sim
def test_sae_harness_small(tmp_path):
    import scipy.sparse as sp

    cfg = dataclasses.replace(SAE_PRESETS["tiny"], max_nodes=64)
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((40, 40)) < 0.15, rng.integers(-3000, 3000, (40, 40)), 0)
    dense[5] = 0  # an empty row
    s = sp.csr_array(dense)
    path = tmp_path / "g.npz"
    np.savez(path, data=s.data, indices=s.indices, indptr=s.indptr, shape=np.array(s.shape))
    cases = [dict(name="g", graph=str(path), passes=p) for p in (1, 3)]
    results = _run_harness("sae", Harness([sae_feed(cfg, 256)]), cfg, cases)
    for r in results:
        assert r["verified"] and r["nnz"] == s.nnz
        assert r["cycles"] >= r["ideal_cycles"]
        assert 0 < r["utilisation"] <= 1
