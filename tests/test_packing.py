"""Bulk packing matches the layouts' own packing, bit for bit."""

import numpy as np
import scipy.sparse as sp

from mixgcn.gen.config import DCE_PRESETS, SAE_PRESETS
from mixgcn.hdl.dce import DCELayouts
from mixgcn.hdl.sae import SAELayouts
from mixgcn.sim.packing import csr_beat_arrays, pack, unpack_signed
from mixgcn.sim.sae_model import csr_beats


def test_array_layout_matches_const():
    lay = DCELayouts(DCE_PRESETS["tiny"]).b_layout
    rng = np.random.default_rng(0)
    v = rng.integers(-32768, 32768, size=(50, lay.length))
    v[0] = -32768
    assert pack(lay, v) == [lay.const(r).as_bits() for r in v.tolist()]


def test_csr_beats_match_const_and_reference():
    cfg = SAE_PRESETS["tiny"]
    lay = SAELayouts(cfg).csr_layout
    rng = np.random.default_rng(1)
    dense = np.where(rng.random((30, 40)) < 0.2, rng.integers(-32768, 32768, (30, 40)), 0)
    dense[[3, 7]] = 0  # empty rows
    s = sp.csr_array(dense)
    arrays = csr_beat_arrays(s, cfg.edges)
    reference = csr_beats(s, cfg.edges)
    assert arrays["count"].tolist() == [b["count"] for b in reference]
    assert pack(lay, arrays) == [lay.const(b).as_bits() for b in reference]


def test_unpack_inverts_pack():
    lay = SAELayouts(SAE_PRESETS["tiny"]).out_layout
    rng = np.random.default_rng(2)
    rows = rng.integers(-32768, 32768, size=(20, lay["data"].shape.length))
    rows[0] = [-32768, 32767, 0]
    words = [lay.const({"data": r, "last": i % 2}).as_bits() for i, r in enumerate(rows.tolist())]
    assert np.array_equal(unpack_signed(words, 16, rows.shape[1]), rows)
