"""cocotb module of ``make bench``: engine utilisation on the memory-fed harnesses.

Runs in the simulator through :func:`mixgcn.sim.runner.run_cocotb` on the Verilog of
:class:`~mixgcn.sim.harness.DCEHarness` or :class:`~mixgcn.sim.harness.SAEHarness`
(``MIXGCN_BENCH_KIND``). Cases arrive as JSON in ``MIXGCN_BENCH_CASES``; results go
to ``MIXGCN_BENCH_OUT``. Python loads the memories and starts each case; the clock
then runs with no Python per cycle. Every output row is compared with the golden
model, so a case that measured a wrong answer fails instead of reporting.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles

from mixgcn.gen.config import DCEConfig, SAEConfig
from mixgcn.golden import fixed
from mixgcn.sim.feed_driver import run_feed
from mixgcn.sim.packing import csr_beat_arrays, pack

KIND = os.environ.get("MIXGCN_BENCH_KIND", "dce")


def _dce_case(cfg, layouts, case, rng):
    from mixgcn.sim.dce_model import OPS, weight_words

    op, n, k, m = case["op"], case["n"], case["k"], case["m"]
    R, V = cfg.rows, cfg.b_lanes
    depth = int(os.environ["MIXGCN_HARNESS_DEPTH"])
    a_mem = rng.integers(-2000, 2001, size=(depth, R))
    if op == "xtg":
        a_count = n
        x = a_mem[np.arange(n) % depth][:, :k]
        b_mem = rng.integers(-2000, 2001, size=(depth, V))
        w = b_mem[np.arange(n) % depth][:, :m]
        b_count = n
    else:
        chunks = -(-k // R)
        a_count = n * chunks
        x = a_mem[np.arange(a_count) % depth].reshape(n, chunks * R)[:, :k]
        w = rng.integers(-2000, 2001, size=(k, m) if op == "xw" else (m, k))
        b_mem = weight_words(op, w, R, V)
        b_count = len(b_mem)
    acc = fixed.gemm(op, x, w)
    shift = max(0, int(np.abs(acc).max()).bit_length() - (cfg.width - 1))
    want, _ = fixed.output_stage(acc, shift, cfg.width)
    cmd = dict(op=OPS[op], rows=n, k=k, m=m, shift=shift, relu=0, mask=0)
    images = {"cmd": ([layouts["cmd"].const(cmd).as_bits()], 1, 1),
              "a": (pack(layouts["a"], a_mem), a_count, depth),
              "b": (pack(layouts["b"], b_mem), b_count, max(1, min(depth, b_count)))}
    macs = n * k * m
    steady = n if op == "xtg" else n * -(-k // R)
    load = 0 if op == "xtg" else b_count
    info = dict(op=op, n=n, k=k, m=m, reduction=n if op == "xtg" else k, useful_macs=macs,
                ideal_cycles=-(-macs // (R * cfg.cols)), steady_cycles=steady,
                weight_load_cycles=load)
    return images, want, len(want), macs, info, cfg.rows * cfg.cols


def _sae_case(cfg, layouts, case, rng):
    import scipy.sparse as sp

    data = np.load(case["graph"])
    s = sp.csr_array((data["data"], data["indices"], data["indptr"]), shape=tuple(data["shape"]))
    n, passes, L = s.shape[0], case["passes"], cfg.lanes
    x = rng.integers(-2000, 2001, size=(n, L))
    beats = pack(layouts["csr"], csr_beat_arrays(s, cfg.edges))
    acc = fixed.spmm(s, x)
    shift = max(0, int(np.abs(acc).max()).bit_length() - (cfg.width - 1))
    want, _ = fixed.output_stage(acc, shift, cfg.width)
    cmds = []
    for p in range(passes):  # every pass: load its slice (the same data), then SpMM
        cmds += [dict(op=0, bank=p % 2, rows=n, shift=0, relu=0, mask=0),
                 dict(op=1, bank=p % 2, rows=n, shift=shift, relu=0, mask=0)]
    images = {"cmd": ([layouts["cmd"].const(c).as_bits() for c in cmds], len(cmds), len(cmds)),
              "x": (pack(layouts["x"], x), passes * n, n),
              "csr": (beats, passes * len(beats), len(beats))}
    info = dict(graph=case["name"], n=n, nnz=s.nnz, features=passes * L, passes=passes,
                edges=cfg.edges, lanes=L, beats_per_pass=len(beats),
                useful_macs=s.nnz * L * passes,
                ideal_cycles=-(-s.nnz * passes // cfg.edges))
    return images, want, passes * n, s.nnz * L * passes, info, L * cfg.edges


@cocotb.test()
async def bench(dut):
    if KIND == "dce":
        from mixgcn.hdl.dce import DCELayouts as Layouts

        cfg = DCEConfig(**json.loads(os.environ["MIXGCN_ENGINE_CONFIG"]))
        make_case, lanes = _dce_case, cfg.cols
    else:
        from mixgcn.hdl.sae import SAELayouts as Layouts

        cfg = SAEConfig(**json.loads(os.environ["MIXGCN_ENGINE_CONFIG"]))
        make_case, lanes = _sae_case, cfg.lanes
    lay = Layouts(cfg)
    layouts = {"cmd": lay.cmd_layout}
    layouts.update({k: getattr(lay, f"{k}_layout") for k in ("a", "b", "x", "csr")
                    if hasattr(lay, f"{k}_layout")})
    layouts["mask"] = None
    rng = np.random.default_rng(0)
    Clock(dut.clk, 10, unit="ns").start()
    getattr(dut, f"{KIND}_start").value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    results = []
    for case in json.loads(os.environ["MIXGCN_BENCH_CASES"]):
        images, want, rows, macs, info, units = make_case(cfg, layouts, case, rng)
        m = info.get("m", lanes)
        # every image arrives packed (mixgcn.sim.packing): the driver writes plain ints
        res, got = await run_feed(dut, KIND, dict.fromkeys(layouts), images, rows,
                                  lay.out_layout, m, out_period=len(want))
        verified = bool(np.array_equal(got, want[:, :m]))
        assert verified, f"{case}: output differs from the golden model"
        res.update(info, verified=verified, utilisation=macs / (units * res["cycles"]))
        results.append(res)
        dut._log.info("%s", res)
    with open(os.environ["MIXGCN_BENCH_OUT"], "w") as f:
        json.dump(results, f, indent=2)
