"""The analytic performance model (host/perf_model.py) predicts the simulated chip's
cycles batch by batch, and a training run through its device predicts an epoch
without building anything."""

from __future__ import annotations

import numpy as np
import pytest

from mixgcn.gen.config import CHIP_PRESETS, MEMORY_PROFILES
from mixgcn.golden.datasets import load_dataset
from mixgcn.golden.gcn import GCNConfig
from mixgcn.hdl.chip import ChipLayouts
from mixgcn.host.chip_driver import ChipBackend
from mixgcn.host.packing import csr_beat_arrays, pack, unpack_unsigned
from mixgcn.host.perf_model import ModelDevice, ModelTap, PerfModel
from mixgcn.host.train import train

GRAPH = "synthetic:nodes=120,features=24"


def test_unpack_unsigned_inverts_pack():
    import scipy.sparse as sp

    lay = ChipLayouts(CHIP_PRESETS["tiny"])
    rng = np.random.default_rng(1)
    s = sp.random_array((30, 40), density=0.2, random_state=rng, format="csr")
    beats = csr_beat_arrays(s, 2)
    words = pack(lay.stream_layouts["csr"], beats, 8)
    assert np.array_equal(unpack_unsigned(lay.stream_layouts["csr"], words, "col"), beats["col"])
    assert np.array_equal(unpack_unsigned(lay.stream_layouts["csr"], words, "last")[:, 0],
                          beats["last"])
    with pytest.raises(ValueError, match="no field 'cols'"):
        unpack_unsigned(lay.stream_layouts["csr"], words, "cols")


def test_credit_lets_depth_rows_through_a_loop():
    # four rows, all ready at 0, a row a cycle, two credits, a loop of 5 cycles
    t = PerfModel._credited(np.zeros(5), 1.0, np.array([1, 1, 1, 0, 1], dtype=bool), 2, 5)
    assert t.tolist() == [0, 1, 5, 6, 7]
    # a reader's pace
    assert PerfModel._paced(np.array([0, 0, 10, 0]), 1.5).tolist() == [0, 1.5, 10, 11.5]


def test_the_memory_profile_sets_the_pace():
    chip = CHIP_PRESETS["tiny"]
    assert PerfModel(chip).word == 1.0
    slow = PerfModel(chip, MEMORY_PROFILES["ulx3s-sdram"])
    assert slow.word == (10 + 2) / chip.reader_depth


def test_bursts_reopen_on_short_turns_only():
    """DDR3 behind a 4:1 PHY answers a reader's four words faster than a request's round
    trip: with other streams at work each turn reopens a burst, and the requests wait
    for it. The ULX3S's SDRAM takes longer over four words than a round trip: a reader
    keeps its turn for a whole burst, and the requests do not wait."""
    chip = CHIP_PRESETS["default"]  # 256-bit words
    ddr3 = PerfModel(chip, MEMORY_PROFILES["ecpix5-ddr3"])  # 128 bits a cycle
    assert ddr3.short_turns and ddr3.turn_words == chip.reader_depth
    assert ddr3.gemm_word(1) == (20 + 2 + 4) / chip.reader_depth  # a write every word
    assert ddr3.gemm_word(4) == (20 + 2 + 1) / chip.reader_depth  # a write every 4 words
    sdram = PerfModel(chip, MEMORY_PROFILES["ulx3s-sdram"])  # 16 bits a cycle
    assert not sdram.short_turns and sdram.turn_words == 2048 * 8 // 256
    assert sdram.gemm_word(1) == sdram.word
    for name in ("ideal", "hbm"):  # no bursts: nothing changes
        m = PerfModel(chip, MEMORY_PROFILES[name])
        assert not m.short_turns and m.gemm_word(1) == m.word == m.word_beside


def _train(backend, epochs=1):
    return train(load_dataset(GRAPH), GCNConfig(epochs=epochs, seed=3), precision="fixed16",
                 backend=backend)


@pytest.mark.sim
@pytest.mark.parametrize("memory", ["ideal", "hbm"])
def test_the_model_predicts_every_batch_of_the_tiny_chip(memory):
    """Every batch of a training epoch (kernels alone, pipelined pairs, side by side),
    on the ideal memory and on one with latency: the model within 2 % of the chip."""
    from mixgcn.host.backends import opened

    profile = MEMORY_PROFILES[memory]
    with opened("rtl", chip=CHIP_PRESETS["tiny"], chip_name="tiny", memory=profile) as be:
        tap = ModelTap(be.device, profile)
        be.device = tap
        rtl = _train(be)
        kinds = [b.kind for b in be.report().batches]
    assert len(tap.predictions) == len(kinds) > 5
    assert any("|" in k for k in kinds)  # the pairs are predicted too
    for kind, (label, model, real) in zip(kinds, tap.predictions, strict=True):
        assert abs(model - real) <= 0.02 * real, (kind, label, model, real)
    for model, real in tap.words:  # the words moved, exactly
        assert model == real
    # the model's device alone: the same epoch, nothing built or simulated
    alone = _train(ChipBackend(ModelDevice(CHIP_PRESETS["tiny"], memory=profile)))
    assert alone["backend"] == "model"
    assert abs(alone["epoch_cycles"][0] - rtl["epoch_cycles"][0]) <= 0.02 * rtl["epoch_cycles"][0]


def test_the_model_device_refuses_what_it_was_never_written():
    dev = ModelDevice(CHIP_PRESETS["tiny"])
    with pytest.raises(ValueError, match="never written words 5..9"):
        dev.memory.read(5, 5)
