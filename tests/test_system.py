"""P chips joined by an exchange fabric, simulated as one system (Verilator): each
direction of the all-to-all bit-exact with golden (odd row counts, uneven lane
slices), every byte the fabric's links carried counted by its own flit counters, and
training across the fabric equal to one chip — on crossbar and on serial links with
random link stalls. Bad configurations and options are refused."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.gen.config import CHIP_PRESETS, FABRIC_PRESETS, ConfigError, FabricConfig, SystemConfig
from mixgcn.golden.backend import GoldenBackend, Stage
from mixgcn.golden.datasets import make_synthetic
from mixgcn.golden.gcn import GCNConfig
from mixgcn.host.backends import open_system
from mixgcn.host.chip_driver import ChipBackend
from mixgcn.host.cli import main
from mixgcn.host.sharding import column_slices
from mixgcn.host.train import Parallel, train
from mixgcn.sim.chip.process import check_route

TINY = CHIP_PRESETS["tiny"]  # 4 lanes: hidden and class widths up to 4 cross as one word


# each system's tests run on one test worker (xdist_group), so two workers never build
# (or wait for) the same system at once
@pytest.fixture(scope="module", params=[
    pytest.param((2, "serial"), id="P2-serial", marks=pytest.mark.xdist_group("P2-serial")),
    # the crossbar's system with the slow tier (test_fabric moves rows through it under
    # stalls in make test, P = 2 and 3); P2-serial is make test's system of chips
    pytest.param((3, "crossbar"), id="P3-crossbar",
                 marks=[pytest.mark.xdist_group("P3-crossbar"), pytest.mark.slow]),
    pytest.param((4, "serial"), id="P4-serial", marks=pytest.mark.slow)])
def system(request):
    P, kind = request.param
    # links stall one cycle in four: the flow control under pressure
    comm = open_system(P, kind, chip=TINY, chip_name="tiny", link_stall=64)
    yield comm
    comm.close()


def _route(mode, columns, P):
    cols = column_slices(columns, P)
    return cols, dict(mode=mode, lo=[int(c[0]) for c in cols], count=[len(c) for c in cols])


def _operands(rng, n, f, m):
    s = sp.random_array((n, n), density=0.15, random_state=rng, format="csr")
    s.data[:] = rng.integers(-60, 60, s.nnz)
    s = sp.csr_array(s)
    return (s, rng.integers(-120, 120, (n, f)), rng.integers(-120, 120, (f, m)),
            (Stage(shift=3, relu=False, mask=None), Stage(shift=4, relu=True, mask=None)))


@pytest.mark.sim
def test_both_directions_across_the_fabric_equal_golden(system):
    fabric, P = system.fabric, system.size
    chips = [ChipBackend(c) for c in fabric.chips]
    golden = GoldenBackend()
    rng = np.random.default_rng(P)
    m = max(3, P)  # the GEMM's width: uneven lanes per chip when P < 4
    for n in (17, 2 * P + 1):  # rows not a multiple of P; a chip with two rows
        s, x, w, stages = _operands(rng, n, 4, m)
        # SpMM → GEMM: the SpMM's columns on their chips, the GEMM's rows on their owners
        want = golden.spmm_gemm(s, x, "xw", w, stages)
        cols, route = _route("scatter", 4, P)
        before = fabric.link_flits.copy()

        def scatter(p, cols=cols, route=route, s=s, x=x, w=w, stages=stages, n=n):
            mine = np.where(np.isin(np.arange(4), cols[p]), x, 0)
            return chips[p].spmm_gemm_fabric(s, mine, "xw", w, stages,
                                              rows=len(range(p, n, P)), route=route)

        with ThreadPoolExecutor(P) as pool:
            got = list(pool.map(scatter, range(P)))
        for p, r in enumerate(got):
            assert np.array_equal(r.first.rows[:, cols[p]], want.first.rows[:, cols[p]])
            assert np.array_equal(r.second.rows, want.second.rows[p::P]), (n, p)
        # every row left each chip on the link to its owner (crossbar links carry a
        # row a flit; serial links only the chunks of the chip's lanes)
        sent = fabric.link_flits - before
        for p in range(P):
            for q in range(P):
                rows = len(range(q, n, P))
                assert (sent[p, q] == 0) == (rows == 0)
                assert sent[p, q] % rows == 0, (p, q, sent[p, q])

        # GEMM → SpMM: the GEMM's rows on their owners, every row to every chip
        want = golden.gemm_spmm("xw", x, w, s, stages)
        cols, route = _route("gather", m, P)

        def gather(p, route=route, s=s, x=x, w=w, stages=stages):
            return chips[p].gemm_spmm_fabric("xw", x[p::P], w, s, stages, route=route)

        with ThreadPoolExecutor(P) as pool:
            got = list(pool.map(gather, range(P)))
        for p, r in enumerate(got):
            assert np.array_equal(r.first.rows, want.first.rows[p::P])
            assert np.array_equal(r.second.rows[:, cols[p]], want.second.rows[:, cols[p]])
            others = np.setdiff1d(np.arange(m), cols[p])
            assert not r.second.rows[:, others].any()  # only its own lanes arrived


@pytest.mark.sim
def test_training_across_the_fabric_equals_one_chip(system):
    P = system.size
    ds = make_synthetic(nodes=90, degree=4, features=20, classes=4, seed=3)  # 4 ≥ P
    config = GCNConfig(epochs=3, hidden=4, seed=1)
    one = train(ds, config, "fixed16")
    run = train(ds, config, "fixed16", system, parallel=Parallel(P, exchange="fabric"))
    assert run["weights_sha256"] == one["weights_sha256"]
    assert run["exchange"] == "fabric" and run["partitioner"] == "cyclic"
    # across P > 1 chips only the fabric runs a pair as one step
    assert {k for k in run["cycles_per_op"] if "+" in k}, run["cycles_per_op"]
    # the fabric's links between chips carried bytes, counted by their flit counters
    assert run["bytes_per_op"]["fabric"] == run["fabric_bytes"] > 0


def test_bad_systems_and_options_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="chips must be in 2..64, got 1"):
        SystemConfig(chips=1)
    with pytest.raises(ConfigError, match="kind must be one of crossbar, serial, got 'wifi'"):
        FabricConfig(kind="wifi")
    with pytest.raises(ConfigError, match="link_width must be >= 1 for serial links"):
        FabricConfig(kind="serial")
    with pytest.raises(ConfigError, match="unknown key"):
        SystemConfig.from_dict({"chips": 2, "lanes": 3})
    assert SystemConfig.from_dict(SystemConfig(chips=3, fabric=FABRIC_PRESETS["serial"])
                                  .to_dict()).chips == 3
    for bad, message in (({"mode": "spread", "lo": [0, 2], "count": [2, 2]}, "scatter"),
                         ({"mode": "gather", "lo": [0], "count": [2]}, "2 'lo'"),
                         ({"mode": "gather", "lo": [0, 2], "count": [2, 0]}, "chip 1's"),
                         ({"mode": "gather", "lo": [0, 3], "count": [2, 2]}, "chip 1's"),
                         ({"mode": "scatter", "lo": [0, 1], "count": [2, 2]}, "overlap")):
        with pytest.raises(ValueError, match=message):
            check_route(bad, 2, 4)
    with pytest.raises(ValueError, match="not parallelism 'partition'"):
        Parallel(2, "partition", exchange="fabric")
    with pytest.raises(ValueError, match="partitioner 'metis' does not apply"):
        Parallel(2, "mop", "metis", exchange="fabric")
    with pytest.raises(ValueError, match="unknown exchange 'bus'"):
        Parallel(2, exchange="bus")
    base = ["train", "--dataset", "synthetic", "--epochs", "1", "--chips", "2"]
    for extra, message in (
            (["--backend", "golden", "--precision", "fixed16", "--exchange", "fabric"],
             "use --backend rtl"),
            (["--backend", "rtl", "--fabric", "serial"], "applies with --exchange fabric"),
            (["--backend", "rtl", "--exchange", "fabric", "--parallelism", "partition"],
             "not parallelism 'partition'")):
        with pytest.raises(SystemExit) as e:
            main(base + extra)
        assert message in str(e.value), (extra, e.value)


def _pair(chips, P, mode, s, x, w, stages):
    """One pair across the fabric on every chip at once; each chip's PairResult."""
    n = s.shape[0]
    cols, route = _route(mode, x.shape[1] if mode == "scatter" else w.shape[1], P)

    def share(p):
        if mode == "scatter":
            mine = np.where(np.isin(np.arange(x.shape[1]), cols[p]), x, 0)
            return chips[p].spmm_gemm_fabric(s, mine, "xw", w, stages,
                                              rows=len(range(p, n, P)), route=route)
        return chips[p].gemm_spmm_fabric("xw", x[p::P], w, s, stages, route=route)

    with ThreadPoolExecutor(P) as pool:
        return cols, list(pool.map(share, range(P)))


def _check(golden, P, mode, s, x, w, stages, cols, got, what):
    if mode == "scatter":
        want = golden.spmm_gemm(s, x, "xw", w, stages)
        for p, r in enumerate(got):
            assert np.array_equal(r.first.rows[:, cols[p]], want.first.rows[:, cols[p]]), what
            assert np.array_equal(r.second.rows, want.second.rows[p::P]), what
    else:
        want = golden.gemm_spmm("xw", x, w, s, stages)
        for p, r in enumerate(got):
            assert np.array_equal(r.first.rows, want.first.rows[p::P]), what
            assert np.array_equal(r.second.rows[:, cols[p]], want.second.rows[:, cols[p]]), what


@pytest.mark.sim
def test_seeded_random_stress_with_memory_stalls(system):
    """Random shapes (rows, lanes per chip, both modes) with every chip's memory
    refusing requests and writes one cycle in four, the links stalling too."""
    fabric, P = system.fabric, system.size
    golden = GoldenBackend()
    for chip in fabric.chips:
        chip.stalls(read=64, write=64)
    try:
        rng = np.random.default_rng(100 + P)
        for trial in range(6):
            n = int(rng.integers(P, 40))
            f, m = int(rng.integers(P, 5)), int(rng.integers(P, 5))
            s, x, w, stages = _operands(rng, n, f, m)
            chips = [ChipBackend(c) for c in fabric.chips]
            for mode in ("scatter", "gather"):
                cols, got = _pair(chips, P, mode, s, x, w, stages)
                _check(golden, P, mode, s, x, w, stages, cols, got, (trial, mode, n, f, m))
    finally:
        for chip in fabric.chips:
            chip.stalls(0, 0)


@pytest.mark.sim
def test_reset_mid_batch_leaves_nothing_behind(system, monkeypatch):
    """A fabric batch stopped by reset while rows are in flight on every chip and link;
    the next batches are exact (no stale row in a buffer, link or reassembly)."""
    import mixgcn.host.chip_driver as driver
    from mixgcn.host.device import DeviceError, TimeoutPolicy

    fabric, P = system.fabric, system.size
    golden = GoldenBackend()
    rng = np.random.default_rng(7)
    s, x, w, stages = _operands(rng, 37, 4, 4)
    for mode in ("scatter", "gather"):
        # a budget the batch cannot meet: the chips are stopped mid-flight
        monkeypatch.setattr(driver, "TIMEOUTS", TimeoutPolicy(cycles_per_unit=0,
                                                              base_cycles=40))
        with pytest.raises(DeviceError, match="budget"):
            _pair([ChipBackend(c) for c in fabric.chips], P, mode, s, x, w, stages)
        monkeypatch.undo()
        fabric.reset()
        for again in range(2):
            cols, got = _pair([ChipBackend(c) for c in fabric.chips], P, mode, s, x, w,
                              stages)
            _check(golden, P, mode, s, x, w, stages, cols, got, (mode, again))
