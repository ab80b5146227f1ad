"""Bulk packing matches the layouts' own packing, bit for bit."""

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.gen.config import DCE_PRESETS, SAE_PRESETS
from mixgcn.hdl.dce import DCELayouts
from mixgcn.hdl.sae import SAELayouts
from mixgcn.host.packing import (
    csr_beat_arrays,
    csr_beat_count,
    from_ints,
    pack,
    to_ints,
    unpack_signed,
    word_bytes,
)
from mixgcn.sim.verify.sae_model import csr_beats


def test_array_layout_matches_const():
    lay = DCELayouts(DCE_PRESETS["tiny"]).b_layout
    rng = np.random.default_rng(0)
    v = rng.integers(-32768, 32768, size=(50, lay.length))
    v[0] = -32768
    assert to_ints(pack(lay, v)) == [lay.const(r).as_bits() for r in v.tolist()]


def _decode(beats, rows):
    """Rows of (col, val) pairs as the engine reads the beats (the format's definition)."""
    out, current = [], []
    for b in beats:
        pairs = list(zip(b["col"][:b["count"]], b["val"][:b["count"]], strict=True))
        if b["last"]:
            out.append(current + pairs[:b["split"]])
            current = pairs[b["split"]:]
        else:
            current += pairs
    assert current == [] and len(out) == rows
    return out


@pytest.mark.parametrize("edges", [1, 2, 4])
def test_csr_beats_spell_out_the_matrix(edges):
    cfg = SAE_PRESETS["tiny"]
    lay = SAELayouts(cfg).csr_layout if edges == cfg.edges else None
    rng = np.random.default_rng(edges)
    dense = np.where(rng.random((60, 40)) < 0.1, rng.integers(-32768, 32768, (60, 40)), 0)
    dense[[3, 7, 8, 9]] = 0  # empty rows, three in a row
    dense[20] = rng.integers(1, 100, 40)  # a full row
    s = sp.csr_array(dense)
    beats = csr_beats(s, edges)
    rows = _decode(beats, 60)
    for i in range(60):
        lo, hi = s.indptr[i], s.indptr[i + 1]
        assert rows[i] == list(zip(s.indices[lo:hi].tolist(), s.data[lo:hi].tolist(),
                                   strict=True))
    assert all(b["count"] <= edges and b["split"] <= b["count"] for b in beats)
    # packed across rows: no more beats than the non-zeros need or the row ends need
    assert len(beats) <= s.nnz // edges + 60
    if lay is not None:
        arrays = csr_beat_arrays(s, edges)
        assert to_ints(pack(lay, arrays)) == [lay.const(b).as_bits() for b in beats]
    assert csr_beat_count(s, edges) == len(beats)


def test_unpack_inverts_pack():
    lay = SAELayouts(SAE_PRESETS["tiny"]).out_layout
    rng = np.random.default_rng(2)
    rows = rng.integers(-32768, 32768, size=(20, lay["data"].shape.length))
    rows[0] = [-32768, 32767, 0]
    words = [lay.const({"data": r, "last": i % 2}).as_bits() for i, r in enumerate(rows.tolist())]
    packed = from_ints(words, word_bytes(lay.size) + 2)  # wider words: the padding is 0
    assert np.array_equal(unpack_signed(packed, 16, rows.shape[1]), rows)
    assert to_ints(packed) == words


def test_memory_files_round_trip():
    # what the memory model reads ($readmemh) and writes ($writememh), trimmed per block
    from mixgcn.sim.chip.control import hex_lines, parse_hex_lines

    rng = np.random.default_rng(3)
    for bits, used in ((256, 8), (256, 32), (63, 8), (64, 0)):
        nb = (bits + 7) // 8
        words = np.zeros((25, nb), dtype=np.uint8)
        words[:, :used] = rng.integers(0, 256, (25, used))
        if bits % 8:
            words[:, -1] &= (1 << (bits % 8)) - 1
        text = hex_lines(words, bits)
        lines = text.decode().split()
        assert len(lines) == 25 and len({len(ln) for ln in lines}) == 1
        assert len(lines[0]) <= max(1, 2 * used)  # no digits the block does not use
        padded = "\n".join(ln.rjust(-(-bits // 4), "0") for ln in lines)  # as $writememh
        assert np.array_equal(parse_hex_lines(padded.encode(), 25, nb), words)
    with pytest.raises(RuntimeError, match="a memory dump of 3 words held 2"):
        parse_hex_lines(b"00\n01\n", 3, 1)
