"""``make bench``: measure, never assert. Writes one JSON object plus a readable table.

Every run writes complete results: each section either measures now or is recorded
as not run, with the reason — nothing is carried over from an older file. A section
returns ``(keys, table rows)``; ``python -m mixgcn.host.bench --only golden`` runs
one (the others are then recorded as not selected).

The engines are measured on the chip (the harness ``--backend rtl`` runs), with the
memory model answering every request (no stalls): a GEMM's cycles are those of its
descriptor from issue to completion, an SpMM's those of its batch (the first LOAD
included, as a real pass pays it). Every output row is compared with the golden
model, so a case that measured a wrong answer fails instead of reporting.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from mixgcn.gen.config import CHIP_PRESETS, MEMORY_PROFILES
from mixgcn.golden.backend import GoldenBackend, NumberFormat, Stage
from mixgcn.golden.datasets import DatasetError, default_data_dir, load_dataset
from mixgcn.golden.gcn import GCNConfig
from mixgcn.host.train import train


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class NotRun(Exception):
    """A section that could not measure (the reason is recorded)."""


def _cora():
    try:
        return load_dataset("cora", default_data_dir())
    except DatasetError as e:
        raise NotRun(f"no Cora: {e}") from None


def bench_golden() -> tuple[dict, list[str]]:
    """Wall time of a golden training epoch (Cora when present, synthetic graphs)."""
    keys, rows = {}, ["golden model: median epoch wall time (forward + backward + Adam)"]
    datasets = []
    try:
        datasets.append(("cora", _cora()))
    except NotRun as e:
        _log(f"Cora skipped: {e}")
        keys["golden_cora"] = dict(status="not run", reason=str(e))
    datasets.append(("synthetic", load_dataset("synthetic")))
    datasets.append(("synthetic_1m", load_dataset("synthetic:nodes=100000,degree=20")))
    for tag, ds in datasets:
        for precision in ("float32", "fixed16"):
            epochs = 200 if ds.num_nodes < 10_000 else 5
            _log(f"golden {tag} {precision}: {epochs} epochs")
            r = train(ds, GCNConfig(epochs=epochs), precision=precision)
            keys[f"golden_{tag}_epoch_seconds_{precision}"] = r["epoch_seconds_median"]
            keys[f"golden_{tag}_test_accuracy_{precision}"] = r["test_accuracy"]
            rows.append(f"  {tag:<13} {ds.num_nodes:>7} nodes {ds.num_edges:>8} edges  "
                        f"{precision:<8} {r['epoch_seconds_median'] * 1e3:9.2f} ms/epoch  "
                        f"test acc {r['test_accuracy']:.3f}")
    return keys, rows


# The chips the engine benchmarks run on: the default chip with memory enough for
# Cora-sized operands (2^20 words), and its SAE at 1 and 4 edge pipelines.
BENCH_CHIP = dataclasses.replace(CHIP_PRESETS["default"], addr_width=20)


def _chip(config):
    from mixgcn.host.chip_driver import ChipBackend
    from mixgcn.sim.chip.process import SimulatedChip

    return ChipBackend(SimulatedChip(config, name="bench chip",
                                     on_build=lambda: _log("building the chip (once)")))


def dce_cases(config) -> list[dict]:
    """Cora-shaped work: 2708 rows, reductions from 16 to 1433 (Cora's features)."""
    n, m = 2708, config.cols
    cases = [dict(op="xw", n=n, k=k, m=m) for k in (16, 32, 48, 64, 128, 256, 512, 1433)]
    cases += [dict(op="xwt", n=n, k=k, m=m) for k in (16, 64, 1433)]
    cases.append(dict(op="xtg", n=n, k=config.rows, m=m))  # reduction over the 2708 rows
    cases.append(dict(op="xw", n=n, k=1433, m=7))  # Cora's 7 classes: a narrow tile
    return cases


def bench_dce(chip_config=BENCH_CHIP, cases: list[dict] | None = None) -> tuple[dict, list[str]]:
    """DCE utilisation = useful MACs / (MACs × cycles of the GEMM descriptor)."""
    from mixgcn.hdl.chip import Unit

    cfg = chip_config.dce
    cases = dce_cases(cfg) if cases is None else cases
    golden = GoldenBackend(NumberFormat(cfg.width, cfg.acc_width))
    rng = np.random.default_rng(0)
    results = []
    _log(f"dce: {cfg.rows}x{cfg.cols} MACs, {len(cases)} cases")
    chip = _chip(chip_config)
    try:
        for case in cases:
            op, n, k, m = case["op"], case["n"], case["k"], case["m"]
            x = rng.integers(-2000, 2001, size=(n, k))
            w = rng.integers(-2000, 2001, size={"xw": (k, m), "xwt": (m, k), "xtg": (n, m)}[op])
            want = golden.gemm(op, x, w, Stage(0))
            stage = Stage(max(0, want.stats.max_abs.bit_length() - (cfg.width - 1)))
            got, res = chip.run_gemm(op, x, w, stage)
            verified = bool(np.array_equal(got.rows, golden.gemm(op, x, w, stage).rows))
            assert verified, f"{case}: output differs from the golden model"
            (status,) = [s for s in res.status if s.unit == Unit.GEMM]
            macs = n * k * m
            results.append(dict(case, reduction=n if op == "xtg" else k, useful_macs=macs,
                                cycles=status.cycles, busy_cycles=res.counters["dce_busy_cycles"],
                                ideal_cycles=-(-macs // (cfg.rows * cfg.cols)),
                                utilisation=macs / (cfg.rows * cfg.cols * status.cycles),
                                verified=verified))
    finally:
        chip.close()
    long = [r for r in results if r["reduction"] >= 4 * cfg.rows and r["m"] == cfg.cols]
    keys = dict(dce_utilisation=min(r["utilisation"] for r in long), dce_cases=results,
                dce_array=f"{cfg.rows}x{cfg.cols}")
    rows = [f"DCE ({cfg.rows}x{cfg.cols} MACs) on the chip, Cora-shaped, no memory stalls",
            f"  {'op':<4} {'N':>5} {'K':>5} {'M':>3} {'cycles':>9} {'ideal':>9} {'util':>7}  "
            "verified"]
    for r in results:
        rows.append(f"  {r['op']:<4} {r['n']:>5} {r['k']:>5} {r['m']:>3} {r['cycles']:>9} "
                    f"{r['ideal_cycles']:>9} {r['utilisation']:>7.2%}  {r['verified']}")
    rows.append(f"  dce_utilisation (lowest with reduction >= {4 * cfg.rows}, full tile): "
                f"{keys['dce_utilisation']:.2%}")
    return keys, rows


def sae_graphs() -> dict:
    """Cora's Â (when present) and a power-law synthetic Â of over 100 000 edges, as
    16-bit mantissas."""
    from mixgcn.golden import fixed
    from mixgcn.golden.graph import normalized_adjacency

    graphs = {}
    try:
        graphs["cora"] = _cora()
    except NotRun as e:
        _log(f"Cora skipped: {e}")
    graphs["powerlaw"] = load_dataset("synthetic:nodes=8000,degree=16")
    return {name: fixed.quantize(normalized_adjacency(ds.edge_index, ds.num_nodes), 16).mant
            for name, ds in graphs.items()}


def bench_sae(chip_config=BENCH_CHIP, graphs: dict | None = None,
              edges=(1, 4)) -> tuple[dict, list[str]]:
    """SAE utilisation = nnz·F / (L·E·cycles) for E = 1 and E = 4, one pass (F = L) and
    four (F = 4L: the next slice loads while the current one is aggregated)."""
    graphs = sae_graphs() if graphs is None else graphs
    L = chip_config.lanes
    rng = np.random.default_rng(0)
    results = []
    for e in edges:
        cfg = dataclasses.replace(chip_config, sae=dataclasses.replace(chip_config.sae, edges=e))
        golden = GoldenBackend(NumberFormat(cfg.sae.width, cfg.sae.acc_width))
        _log(f"sae: {L} lanes x {e} edge pipelines, {len(graphs)} graphs")
        chip = _chip(cfg)
        try:
            for name, s in graphs.items():
                for passes in (1, 4):
                    x = rng.integers(-2000, 2001, size=(s.shape[1], passes * L))
                    want = golden.spmm(s, x, Stage(0))
                    stage = Stage(max(0, want.stats.max_abs.bit_length() - (cfg.sae.width - 1)))
                    got, res = chip.run_spmm(s, x, stage)
                    verified = bool(np.array_equal(got.rows, golden.spmm(s, x, stage).rows))
                    assert verified, f"{name}, {passes} passes: output differs from golden"
                    macs = s.nnz * L * passes
                    results.append(dict(graph=name, n=s.shape[0], nnz=s.nnz, edges=e, lanes=L,
                                        passes=passes, features=passes * L, cycles=res.cycles,
                                        busy_cycles=res.counters["sae_busy_cycles"],
                                        useful_macs=macs,
                                        ideal_cycles=-(-s.nnz * passes // e),
                                        utilisation=macs / (L * e * res.cycles),
                                        verified=verified))
        finally:
            chip.close()
    keys = dict(sae_cases=results, sae_lanes=L)
    for e in edges:
        pick = [r for r in results if r["edges"] == e and r["graph"] == "powerlaw"
                and r["passes"] == 4]
        if pick:
            keys[f"sae_utilisation_e{e}"] = pick[0]["utilisation"]
    rows = [f"SAE ({L} lanes) on the chip, no memory stalls",
            f"  {'graph':<9} {'E':>2} {'F':>4} {'nnz':>7} {'cycles':>9} {'ideal':>9} "
            f"{'util':>7}  verified"]
    for r in results:
        rows.append(f"  {r['graph']:<9} {r['edges']:>2} {r['features']:>4} {r['nnz']:>7} "
                    f"{r['cycles']:>9} {r['ideal_cycles']:>9} {r['utilisation']:>7.2%}  "
                    f"{r['verified']}")
    if "sae_utilisation_e1" in keys and "sae_utilisation_e4" in keys:
        rows.append(f"  sae_utilisation_e1 / _e4 (power-law, F = 4L): "
                    f"{keys['sae_utilisation_e1']:.2%} / {keys['sae_utilisation_e4']:.2%}")
    return keys, rows


def pipeline_report(alone: dict, piped: dict) -> tuple[list[dict], list[dict]]:
    """Compare two runs of the same training (every kernel alone / pipelined), from
    their ``cycles_per_site`` (the last execution of each site: the same call in both
    runs, as the arithmetic and so the whole run are identical).

    Returns the pairs — pipelined (one feeds the other through the exchange port) or
    beside (independent, one on each engine) — with the cycles of each kernel alone,
    their sum, the pair's cycles, overlap and ratio to the slower one alone; and the
    layer stages (``L1.bwd``: the kernels of a layer's forward or backward; SAE alone
    / DCE alone sum each engine's kernels; a side-by-side pair's cycles count in its
    first kernel's stage)."""
    from mixgcn.host.chip_driver import SAE_KINDS

    pairs = []
    for key, rec in piped.items():
        if rec["pairing"] == "alone":
            continue
        a, b = (alone[site]["last_cycles"] for site in rec["sites"])
        c = rec["last_cycles"]
        pairs.append(dict(site=key, kind=rec["kind"], pairing=rec["pairing"], first=a,
                          second=b, sum=a + b, pipelined=c, overlap=a + b - c,
                          ratio=c / max(a, b)))
    stages = {}
    for site, rec in alone.items():
        st = stages.setdefault(site.rsplit(".", 1)[0],
                               dict(sae=0, dce=0, pipelined=0, kernels=0))
        st["sae" if rec["kind"] in SAE_KINDS else "dce"] += rec["last_cycles"]
        st["kernels"] += 1
    # a pair's first execution ran its kernels alone (delayed scaling): in the pipelined
    # run, only the pair counts
    paired = {site for rec in piped.values() if rec["pairing"] != "alone"
              for site in rec["sites"]}
    for rec in piped.values():
        if rec["pairing"] != "alone" or rec["sites"][0] not in paired:
            stages[rec["sites"][0].rsplit(".", 1)[0]]["pipelined"] += rec["last_cycles"]
    out = []
    for name, st in stages.items():
        st.update(stage=name, sum=st["sae"] + st["dce"],
                  ratio=st["pipelined"] / max(st["sae"], st["dce"]))
        st["overlap"] = st["sum"] - st["pipelined"]
        out.append(st)
    return pairs, sorted(out, key=lambda st: st["stage"])


def _train_rtl(dataset, epochs: int, chip_name: str = "default", chip=None,
               memory=MEMORY_PROFILES["ideal"], **options) -> dict:
    from mixgcn.host.backends import opened

    chip = CHIP_PRESETS[chip_name] if chip is None else chip
    with opened("rtl", chip=chip, chip_name=chip_name, pipeline=options.pop("pipeline", True),
                memory=memory,
                on_build=lambda: _log(f"building the {chip_name} chip (once)")) as backend:
        return train(dataset, GCNConfig(epochs=epochs), precision="fixed16", backend=backend,
                     **options)


def bench_rtl() -> tuple[dict, list[str]]:
    """Training Cora on the simulated default chip: cycles and wall time per epoch, the
    fine-grain pipeline (each kernel alone vs pipelined, per pair and per layer stage)
    and node reordering (none vs rcm)."""
    cora = _cora()
    epochs = 3
    runs = {}
    for reorder in ("none", "rcm"):
        for pipeline in (False, True):
            _log(f"rtl: {epochs} Cora epochs on the default chip, reorder {reorder}, "
                 f"{'pipelined' if pipeline else 'every kernel alone'}")
            runs[reorder, pipeline] = _train_rtl(cora, epochs, reorder=reorder,
                                                 pipeline=pipeline)
    r = runs["none", True]
    cycles = r["epoch_cycles"][-1]
    seconds = r["epoch_seconds_median"]
    keys = dict(cora_epoch_cycles=cycles, rtl_cora_epoch_seconds=seconds,
                rtl_cycles_per_second=cycles / seconds, rtl_level="chip (descriptors)",
                # the simulator alone, without the host's work and the transfers
                rtl_sim_cycles_per_second=r["cycles"] / r["sim_seconds"],
                rtl_host_seconds_share=1 - r["sim_seconds"] / r["wall_seconds"])
    rows = ["RTL backend: Cora on the simulated default chip (SAE 16 lanes x 2 pipelines, "
            "DCE 16x16)"]
    for reorder in ("none", "rcm"):
        alone, piped = runs[reorder, False], runs[reorder, True]
        if alone["weights_sha256"] != piped["weights_sha256"]:
            raise RuntimeError("pipelining changed the weights: the arithmetic differs")
        pairs, stages = pipeline_report(alone["cycles_per_site"], piped["cycles_per_site"])
        tag = "" if reorder == "none" else "_rcm"
        keys[f"pipeline_ratio{tag}"] = max(p["ratio"] for p in pairs)
        keys[f"layer_ratio_worst{tag}"] = max(st["ratio"] for st in stages)
        keys[f"cora_epoch_cycles{tag}"] = piped["epoch_cycles"][-1]
        keys[f"cora_epoch_cycles_unpipelined{tag}"] = alone["epoch_cycles"][-1]
        keys[f"pipeline_pairs{tag}"] = pairs
        keys[f"layer_stages{tag}"] = stages
        rows.append(f"  node order {reorder} (adjacency bandwidth "
                    f"{piped['adjacency_bandwidth']}): epoch {piped['epoch_cycles'][-1]:,} "
                    f"cycles pipelined, {alone['epoch_cycles'][-1]:,} every kernel alone; "
                    f"wall {piped['epoch_seconds_median']:.2f} s/epoch")
        rows.append(f"    {'pair (+ piped, | beside)':<28} {'1st alone':>9} {'2nd alone':>9} "
                    f"{'sum':>7} {'pipelined':>9} {'overlap':>8} {'ratio':>6}")
        for p in pairs:
            rows.append(f"    {p['site']:<28} {p['first']:>9,} {p['second']:>9,} "
                        f"{p['sum']:>7,} {p['pipelined']:>9,} {p['overlap']:>8,} "
                        f"{p['ratio']:>6.3f}")
        rows.append(f"    {'layer stage':<10} {'kernels':>7} {'SAE alone':>9} "
                    f"{'DCE alone':>9} {'sum':>7} {'pipelined':>9} {'overlap':>8} {'ratio':>6}")
        for st in stages:
            rows.append(f"    {st['stage']:<10} {st['kernels']:>7} {st['sae']:>9,} "
                        f"{st['dce']:>9,} {st['sum']:>7,} {st['pipelined']:>9,} "
                        f"{st['overlap']:>8,} {st['ratio']:>6.3f}")
    keys["reorder_epoch_cycles_saved"] = 1 - keys["cora_epoch_cycles_rcm"] / cycles
    rows.append(f"  pipeline_ratio (worst pair) {keys['pipeline_ratio']:.3f} "
                f"(rcm {keys['pipeline_ratio_rcm']:.3f}); worst layer stage "
                f"{keys['layer_ratio_worst']:.3f} (rcm {keys['layer_ratio_worst_rcm']:.3f})")
    rows.append(f"  rcm reordering: {keys['reorder_epoch_cycles_saved']:.1%} fewer cycles "
                f"per epoch")
    rows.append(f"  simulation: {keys['rtl_cycles_per_second']:,.0f} cycles per wall second "
                f"of an epoch; the simulator alone {keys['rtl_sim_cycles_per_second']:,.0f} "
                f"cycles/s; host work (operand layout, transfers, Adam) "
                f"{keys['rtl_host_seconds_share']:.0%} of the wall time")
    return keys, rows


def bench_memory() -> tuple[dict, list[str]]:
    """A Cora epoch on the default chip under each memory profile (docs/memory.md),
    with the preset's readers and with readers deep enough to cover the profile's
    latency (``reader_depth`` = latency + 2); the weights must not change."""
    from mixgcn.hdl.chip import ChipLayouts

    cora = _cora()
    base = CHIP_PRESETS["default"]
    runs, sha, words = {}, None, None
    for name, profile in MEMORY_PROFILES.items():
        depths = sorted({base.reader_depth, max(base.reader_depth, profile.latency + 2)})
        for depth in depths:
            _log(f"memory: 2 Cora epochs on the default chip, {name} memory, "
                 f"reader_depth {depth}")
            chip = dataclasses.replace(base, reader_depth=depth)
            r = _train_rtl(cora, 2, chip=chip, memory=profile)
            if sha is not None and r["weights_sha256"] != sha:
                raise RuntimeError(f"the {name} memory changed the weights: the chip's "
                                   "results depend on when words arrive")
            sha = r["weights_sha256"]
            runs[name, depth] = r["epoch_cycles"][-1]
            moved = (r["chip_words_read"], r["chip_words_written"],
                     r["chip_words_read_distinct"])
            if words is not None and moved != words:
                raise RuntimeError(f"the {name} memory changed the words the chip moved: "
                                   f"{moved} (read, written, distinct reads), {words} on "
                                   "the ideal memory")
            words = moved
            per_op = r["chip_words_read_per_op"]
            distinct_per_op = r["chip_words_read_distinct_per_op"]
    ideal = runs["ideal", base.reader_depth]
    per = {}
    rows = [f"Memory profiles: a Cora epoch (2nd of 2) on the default chip "
            f"({base.lanes} lanes, {ChipLayouts(base).mem_width}-bit memory words); "
            "profiles are model parameters, not board measurements"]
    rows.append(f"  {'profile':<12} {'bits/cycle':>10} {'latency':>7} {'burst':>6} "
                f"{'readers':>7} {'cycles/epoch':>12} {'vs ideal':>8}")
    for (name, depth), cycles in runs.items():
        p = MEMORY_PROFILES[name]
        per.setdefault(name, dict(profile=p.to_dict(), epoch_cycles={}))
        per[name]["epoch_cycles"][str(depth)] = cycles
        rows.append(f"  {name:<12} {p.bandwidth or 'no limit':>10} {p.latency:>7} "
                    f"{p.burst or '-':>6} {depth:>7} {cycles:>12,} {cycles / ideal:>7.2f}x")
    epochs = 2
    rows.append(f"  the chip's memory traffic, the same under every profile (mean of the "
                f"{epochs} epochs): {words[0] / epochs:,.0f} words read, "
                f"{words[1] / epochs:,.0f} written ({ChipLayouts(base).mem_width // 8} bytes "
                f"a word); of the reads, {words[2] / epochs:,.0f} distinct within their "
                f"batch ({words[0] / max(1, words[2]):.2f} reads a word)")
    rows.append(f"    {'operation':<20} {'reads':>10} {'distinct':>10} {'ratio':>6}")
    for k in sorted(per_op):
        rows.append(f"    {k:<20} {per_op[k] / epochs:>10,.0f} "
                    f"{distinct_per_op[k] / epochs:>10,.0f} "
                    f"{per_op[k] / max(1, distinct_per_op[k]):>6.2f}")
    # the same epochs on a real controller: LiteDRAM and its model of the ULX3S's SDRAM
    from mixgcn.gen.dram import DRAM_PARTS
    from mixgcn.sim.build import CLOCK_PERIOD_NS

    dram = DRAM_PARTS["ulx3s-litedram"]
    _log(f"memory: 2 Cora epochs on the default chip, {dram.name} (LiteDRAM)")
    r = _train_rtl(cora, 2, chip=base, memory=dram)
    if r["weights_sha256"] != sha or (r["chip_words_read"], r["chip_words_written"]) != \
            words[:2]:
        raise RuntimeError(f"{dram.name} changed the weights or the words the chip moved")
    dram_cycles = r["epoch_cycles"][-1]
    run_bytes = (r["chip_words_read"] + r["chip_words_written"]) * ChipLayouts(base).mem_width // 8
    # bytes a chip cycle: one beat of the SDR part a cycle of its own (slower) clock
    peak = dram.data_bits / 8 * dram.clock_mhz / (1000 / CLOCK_PERIOD_NS)
    rows.append(f"  {dram.name} (LiteDRAM's controller and model of the part, "
                f"{dram.data_bits}-bit SDR at {dram.clock_mhz:g} MHz beside the chip's "
                f"{1000 / CLOCK_PERIOD_NS:g}): {dram_cycles:,} cycles an "
                f"epoch, {dram_cycles / ideal:.1f}x ideal; over the run the chip moved "
                f"{run_bytes:,} bytes in {r['cycles']:,} cycles, "
                f"{run_bytes / (peak * r['cycles']):.0%} of the part's {peak:g} bytes a chip "
                "cycle")
    per[dram.name] = dict(profile=dram.to_dict(), epoch_cycles=dram_cycles,
                          vs_ideal=dram_cycles / ideal,
                          share_of_peak_bandwidth=run_bytes / (peak * r["cycles"]))
    return dict(cora_epoch_cycles_per_memory=per, memory_weights_sha256=sha,
                cora_epoch_chip_words_read=words[0] / epochs,
                cora_epoch_chip_words_written=words[1] / epochs,
                cora_epoch_chip_words_read_per_op={k: v / epochs for k, v in per_op.items()},
                cora_epoch_chip_words_read_distinct=words[2] / epochs,
                cora_epoch_chip_words_read_distinct_per_op={
                    k: v / epochs for k, v in distinct_per_op.items()}), rows


def _train_modelled(dataset, epochs: int, chip_name: str, memory, pipeline: bool = True,
                    chip=None):
    """A training run on the simulated chip (a preset, or ``chip``) with the
    performance model beside it: (result, [(kind, model cycles, chip cycles) per
    batch], useful MACs)."""
    from mixgcn.host.backends import opened
    from mixgcn.host.perf_model import ModelTap, WorkCounter

    chip = CHIP_PRESETS[chip_name] if chip is None else chip
    with opened("rtl", chip=chip, chip_name=chip_name, pipeline=pipeline,
                memory=memory,
                on_build=lambda: _log(f"building the {chip_name} chip (once)")) as backend:
        tap = ModelTap(backend.device, memory)
        backend.device = tap
        work = WorkCounter(backend)
        r = train(dataset, GCNConfig(epochs=epochs), precision="fixed16", backend=work)
        kinds = [b.kind for b in backend.report().batches]
    return r, [(k, m, c) for k, (_, m, c) in zip(kinds, tap.predictions, strict=True)], work.macs


def bench_model() -> tuple[dict, list[str]]:
    """The analytic performance model (host/perf_model.py, docs/model.md) against the
    simulated chip, batch by batch over two Cora epochs, per preset and memory
    profile; and the whole chip's utilisation: the useful multiply-accumulates of the
    run (counted from its kernels' operands) over its cycles times the chip's
    multipliers."""
    from mixgcn.gen.resources import multipliers

    cora = _cora()
    runs = [("default", "ideal", True), ("default", "ideal", False), ("ecp5", "ideal", True),
            ("default", "hbm", True), ("default", "ulx3s-sdram", True),
            ("default", "ecpix5-ddr3", True), ("ecp5", "ecpix5-ddr3", True)]
    errors: dict[str, dict[str, float]] = {}
    epochs, util = {}, {}
    for chip, memory, pipeline in runs:
        _log(f"model: 2 Cora epochs on the {chip} chip, {memory} memory, "
             f"{'pipelined' if pipeline else 'every kernel alone'}, with the model beside")
        r, batches, macs = _train_modelled(cora, 2, chip, MEMORY_PROFILES[memory], pipeline)
        worst = errors.setdefault(memory, {})
        for kind, model, real in batches:
            err = abs(model - real) / real
            worst[kind] = max(worst.get(kind, 0.0), err)
        tag = f"{chip}/{memory}/{'pipelined' if pipeline else 'alone'}"
        epochs[tag] = dict(chip_cycles=sum(c for _, _, c in batches),
                           model_cycles=sum(m for _, m, _ in batches),
                           epoch_cycles=r["epoch_cycles"])
        if memory == "ideal" and pipeline:
            n = multipliers(CHIP_PRESETS[chip])
            util[chip] = dict(useful_macs=macs, cycles=r["cycles"], multipliers=n,
                              utilisation=macs / (r["cycles"] * n),
                              sae_busy=r.get("sae_busy_cycles"), dce_busy=r.get("dce_busy_cycles"))
    ideal = errors["ideal"]
    keys = dict(model_error_max=max(ideal.values()), model_errors=ideal,
                model_errors_by_memory=errors, model_runs=epochs, chip_utilisation=util)
    rows = ["Performance model (host/perf_model.py) against the simulated chip: the worst "
            "error of any batch of each kind over 2 Cora epochs"]
    kinds = sorted({k for e in errors.values() for k in e})
    rows.append(f"  {'operation':<20} " + " ".join(f"{m:>12}" for m in errors))
    for k in kinds:
        rows.append(f"  {k:<20} " + " ".join(
            f"{errors[m][k]:>12.2%}" if k in errors[m] else f"{'-':>12}" for m in errors))
    rows.append(f"  model_error_max (ideal memory, the chip's design point): "
                f"{keys['model_error_max']:.2%}; the board memories' page openings are modelled "
                "by rules, not a queue of turns (docs/model.md)")
    rows.append(f"  {'run':<30} {'chip cycles':>12} {'model':>12} {'error':>7}")
    for tag, e in epochs.items():
        rows.append(f"  {tag:<30} {e['chip_cycles']:>12,} {e['model_cycles']:>12,} "
                    f"{(e['model_cycles'] - e['chip_cycles']) / e['chip_cycles']:>+7.2%}")
    rows.append("Whole-chip utilisation on Cora (2 epochs, pipelined, ideal memory): useful "
                "MACs / (cycles x multipliers)")
    for chip, u in util.items():
        rows.append(f"  {chip:<8} {u['useful_macs']:>12,} MACs in {u['cycles']:>9,} cycles on "
                    f"{u['multipliers']:>3} multipliers: {u['utilisation']:.1%}")
    return keys, rows


def _explore_cora(cora, part) -> list:
    """Every candidate chip for Cora on ``part``, fastest first (host/explore.py)."""
    from mixgcn.host.explore import explore

    ranked = explore(cora, part)
    if ranked[0].refused is not None:
        raise RuntimeError(f"no candidate holds Cora on {part.name}: {ranked[0].refused}")
    return ranked


def bench_explore() -> tuple[dict, list[str]]:
    """Design-space exploration (host/explore.py) for Cora on the ECP5-85F, then the
    chosen chip and the ``ecp5`` preset trained in RTL: epoch cycles and whole-chip
    utilisation measured, beside the model's."""
    from mixgcn.gen.resources import ECP5_PARTS, chip_block_rams, multipliers
    from mixgcn.host.explore import DSP_FILL, Candidate, evaluate, multiplier_budget

    cora = _cora()
    part = ECP5_PARTS["ecp5-85f"]
    _log(f"explore: Cora on {part.name}, every candidate on the performance model")
    t0 = time.perf_counter()
    ranked = _explore_cora(cora, part)
    seconds = time.perf_counter() - t0
    best = ranked[0]
    preset = CHIP_PRESETS["ecp5"]
    preset_model = evaluate(Candidate(preset, multipliers(preset), chip_block_rams(preset)),
                            cora)
    measured = {}
    for name, cand in (("explored", best), ("ecp5", preset_model)):
        _log(f"explore: 2 Cora epochs in RTL on the {name} chip")
        r, _, macs = _train_modelled(cora, 2, name, MEMORY_PROFILES["ideal"],
                                     chip=cand.config)
        measured[name] = dict(label=cand.label() if name == "explored" else "the ecp5 preset",
                              multipliers=cand.multipliers, bram=cand.bram,
                              epoch_cycles_rtl=r["epoch_cycles"][-1],
                              epoch_cycles_model=cand.epoch_cycles,
                              utilisation_rtl=macs / (r["cycles"] * cand.multipliers),
                              config=cand.config.to_dict())
    keys = dict(explore=dict(part=part.name, dsp_fill=DSP_FILL, candidates=len(ranked),
                             seconds=seconds, chosen=best.to_dict(), measured=measured))
    e, p = measured["explored"], measured["ecp5"]
    rows = [f"Design-space exploration: Cora on {part.name} ({part.dsp} multipliers, at most "
            f"{multiplier_budget(part)} used; {part.bram} block RAMs), {len(ranked)} "
            f"candidates on the model in {seconds:.0f} s",
            f"  {'chip':<46} {'mults':>5} {'BRAM':>5} {'epoch (RTL)':>11} "
            f"{'epoch (model)':>13} {'utilisation':>11}"]
    for m in (e, p):
        rows.append(f"  {m['label']:<46} {m['multipliers']:>5} {m['bram']:>5} "
                    f"{m['epoch_cycles_rtl']:>11,} {m['epoch_cycles_model']:>13,} "
                    f"{m['utilisation_rtl']:>11.1%}")
    rows.append(f"  the explored chip: {1 - e['epoch_cycles_rtl'] / p['epoch_cycles_rtl']:.1%} "
                f"fewer cycles an epoch than the ecp5 preset (RTL)")
    return keys, rows


# the Kipf & Welling setting every peer trains in
PEER_EPOCHS = 200


def _pyg_gcn_epochs(ds, epochs: int) -> dict:
    """PyTorch Geometric's GCN (two GCNConv layers, hidden 16, ReLU, dropout 0.5, Adam
    at 0.01 with weight decay 5e-4 on the first layer, row-normalised features) on the
    CPU: the median wall time of a training epoch (forward, backward, step) and the
    test accuracy after ``epochs``."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    torch.manual_seed(0)
    x = ds.features.toarray()
    x = x / np.maximum(x.sum(axis=1, keepdims=True), 1e-12)
    x, y = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(ds.labels)
    edges = torch.from_numpy(ds.edge_index)
    train, test = torch.from_numpy(ds.train_mask), torch.from_numpy(ds.test_mask)

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(ds.num_features, 16)
            self.conv2 = GCNConv(16, ds.num_classes)

        def forward(self, x, edges):
            x = F.dropout(x, 0.5, self.training)
            x = F.relu(self.conv1(x, edges))
            x = F.dropout(x, 0.5, self.training)
            return self.conv2(x, edges)

    model = GCN()
    opt = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=5e-4),
                            dict(params=model.conv2.parameters(), weight_decay=0)], lr=0.01)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, edges)[train], y[train]).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    model.eval()
    with torch.no_grad():
        acc = float((model(x, edges).argmax(1)[test] == y[test]).float().mean())
    return dict(epoch_seconds=float(np.median(times)), test_accuracy=acc,
                threads=torch.get_num_threads(), torch=torch.__version__)


def _board_fmax(chip: str, config=None) -> dict:
    """The Fmax nextpnr reported for ``chip`` on the ULX3S (the board report ``make
    board`` or ``make bench-boards`` wrote, with its date), or why there is none: no
    report, or one of a chip configured otherwise than ``config`` (the preset's when
    None)."""
    config = CHIP_PRESETS[chip] if config is None else config
    report = Path("build/board") / f"ulx3s-85f-1x{chip}" / "report.json"
    how = (f"make board BOARD=ulx3s-85f CHIP={chip}" if chip in CHIP_PRESETS
           else "make bench-boards")
    if not report.is_file():
        return dict(missing=f"no board report at {report} ({how})")
    rep = json.loads(report.read_text())
    if rep.get("config") != config.to_dict():
        return dict(missing=f"the board report at {report} is of another {chip} chip "
                            f"than this one ({how} again)")
    if rep.get("fmax_mhz") is None:
        return dict(missing=f"the build at {report} did not route")
    built = time.strftime("%Y-%m-%d", time.localtime(report.stat().st_mtime))
    return dict(fmax_mhz=rep["fmax_mhz"], board_report=str(report), built=built)


def bench_peers() -> tuple[dict, list[str]]:
    """A Cora training epoch by each peer, labelled for what it is: PyTorch Geometric's
    GCN on this machine's CPU, the golden numpy model (float32), and the implied time of
    the ``ecp5`` chip and of the chip exploration chooses for Cora on the ECP5-85F —
    its RTL cycles for the epoch divided by the Fmax nextpnr reported for that chip on
    the ULX3S (the board report ``make board`` or ``make bench-boards`` wrote, named
    with its date), never an assumed clock."""
    try:
        import torch  # noqa: F401
        import torch_geometric
    except ImportError:
        raise NotRun("the peers extra is not installed (make bench-peers installs it)") \
            from None
    from mixgcn.gen.resources import ECP5_PARTS

    cora = _cora()
    _log(f"peers: PyG GCN, {PEER_EPOCHS} Cora epochs on the CPU")
    pyg = _pyg_gcn_epochs(cora, PEER_EPOCHS)
    _log(f"peers: golden float32, {PEER_EPOCHS} Cora epochs")
    gold = train(cora, GCNConfig(epochs=PEER_EPOCHS), precision="float32")
    peers = dict(pyg=dict(what=f"PyTorch Geometric {torch_geometric.__version__} GCN, dense "
                               f"features (its example's), CPU ({pyg['threads']} threads)",
                          **pyg),
                 golden=dict(what="golden numpy model, float32",
                             epoch_seconds=gold["epoch_seconds_median"],
                             test_accuracy=gold["test_accuracy"]))
    _log("peers: exploring Cora on ecp5-85f on the performance model")
    explored = _explore_cora(cora, ECP5_PARTS["ecp5-85f"])[0]
    for chip, config in (("ecp5", CHIP_PRESETS["ecp5"]), ("explored", explored.config)):
        _log(f"peers: 2 Cora epochs in RTL on the {chip} chip")
        r = _train_rtl(cora, 2, chip_name=chip, chip=config)
        cycles = r["epoch_cycles"][-1]
        entry = dict(what=f"the {chip} chip: RTL cycles / the ULX3S build's Fmax",
                     epoch_cycles=cycles, config=config.to_dict())
        board = _board_fmax(chip, config)
        if "fmax_mhz" in board:
            entry.update(board, epoch_seconds=cycles / (board["fmax_mhz"] * 1e6))
        else:
            entry.update(board, epoch_seconds=None)
        peers[f"chip_{chip}"] = entry
    rows = [f"Peers: one Cora training epoch (median of {PEER_EPOCHS}; the chip: its "
            "2nd epoch)", f"  {'who':<58} {'epoch':>12} {'test acc':>8}"]
    for p in peers.values():
        t = ("-" if p.get("epoch_seconds") is None
             else f"{p['epoch_seconds'] * 1e3:.3f} ms")
        acc = f"{p['test_accuracy']:.3f}" if "test_accuracy" in p else ""
        rows.append(f"  {p['what']:<58} {t:>12} {acc:>8}")
        if "fmax_mhz" in p:
            rows.append(f"    {p['epoch_cycles']:,} cycles at {p['fmax_mhz']} MHz "
                        f"({p['board_report']}, built {p['built']})")
        elif "missing" in p:
            rows.append(f"    {p['epoch_cycles']:,} cycles; {p['missing']}")
    return dict(peers=peers), rows


# the projection's check: graphs, chips and parallelisms run through the descriptor-level
# model, beside the projection of the same epoch (Cora fits the ecp5 and default chips'
# buffers; on tiny, and the power-law graph on ecp5, SpMMs run in column windows)
PROJECTION_CHECKS = (
    *(("cora", chip, P, par) for chip in ("ecp5", "default", "tiny")
      for P, par in ((1, "mop"), (2, "mop"), (4, "mop"), (2, "partition"), (4, "partition"))),
    ("synthetic:nodes=20000,degree=10", "ecp5", 1, "mop"),
    ("synthetic:nodes=20000,degree=10", "ecp5", 2, "partition"))
PROJECTION_CHIPS = (1, 2, 4, 8, 16, 32)
PROJECTION_CLOCK_MHZ = 100.0  # the design's target, when no board report gives an Fmax


def bench_projection() -> tuple[dict, list[str]]:
    """Projection on paper (host/projection.py, docs/projection.md) of graphs this
    machine cannot hold — model output, labelled so. First its check on Cora: the
    statistics-only kernel cycles against the descriptor-level model's (which the
    model section checks against the RTL) and the proxy-scaled bytes against the
    sharded backend's own count, per chips and parallelism; then Reddit, ogbn-products
    and ogbn-papers100M on the ecp5 chip at its ULX3S Fmax."""
    from mixgcn.host import projection as pj

    checks, graphs = [], {}
    rows = ["Projection check (2nd epoch): kernel cycles projected from the statistics against "
            "the descriptor-level model's (the model section checks that against the RTL) — "
            "with Â known (its beats and column windows the driver's own: the cycle formulas) "
            "and from the statistics alone (as a projected graph); bytes between chips, "
            "proxy-scaled, against the sharded backend's count",
            f"  {'graph':<9} {'chip':<8} {'P':>2} {'parallelism':<10} {'model cycles':>12} "
            f"{'Â known':>8} {'stats only':>10} {'bytes moved':>12} {'projected':>10}"]
    for spec, chip, P, par in PROJECTION_CHECKS:
        if spec not in graphs:
            ds = _cora() if spec == "cora" else load_dataset(spec)
            graphs[spec] = (ds, pj.GraphStats.of(ds))
        ds, g = graphs[spec]
        tag = "cora" if spec == "cora" else "powerlaw"
        _log(f"projection: check on {tag}, {chip} chip, P={P} {par}")
        dims = GCNConfig().dims(g.features, g.classes)
        real = pj.modelled_epoch(ds, CHIP_PRESETS[chip], P, par)
        known = pj.epoch_cycles(g, CHIP_PRESETS[chip], dims, P, par)["cycles"]
        stats = pj.epoch_cycles(g.statistics_only(), CHIP_PRESETS[chip], dims, P, par)["cycles"]
        moved = pj.exchange_bytes(g, P, par)["bytes_total"] if P > 1 else 0
        mc = real["kernel_cycles"]
        e = dict(graph=tag, dataset=spec, chip=chip, chips=P, parallelism=par,
                 model_cycles=mc, projected_cycles=known, projected_cycles_statistics=stats,
                 cycles_error=(known - mc) / mc, cycles_error_statistics=(stats - mc) / mc,
                 bytes_moved=real["bytes_moved"], projected_bytes=moved,
                 bytes_error=((moved - real["bytes_moved"]) / real["bytes_moved"]
                              if real["bytes_moved"] else 0.0))
        checks.append(e)
        rows.append(f"  {tag:<9} {chip:<8} {P:>2} {par:<10} {mc:>12,} "
                    f"{e['cycles_error']:>+8.1%} {e['cycles_error_statistics']:>+10.1%} "
                    f"{e['bytes_moved']:>12,} {e['bytes_error']:>+10.1%}")
    rows.append("  (Â known: the partition baseline's largest share of it; its halo bytes "
                "assume no locality either way)")
    board = _board_fmax("ecp5")
    fmax = board.get("fmax_mhz", PROJECTION_CLOCK_MHZ)
    clock = (f"{fmax} MHz, nextpnr's Fmax for the ecp5 chip on the ULX3S "
             f"({board['board_report']}, built {board['built']})" if "fmax_mhz" in board
             else f"{fmax} MHz, the design's target clock, NOT a measured Fmax "
                  f"({board['missing']})")
    projections = {}
    rows += ["", f"Projection (MODEL OUTPUT, not measured) on the ecp5 chip; clock: {clock}"]
    # Kipf & Welling's hidden width on each graph, and a wider model on Reddit: MoP
    # shares an aggregation's columns, so it scales only while each chip has a word of
    # lanes' worth of them
    runs = [(name, graph, 16) for name, graph in pj.PROJECTED_GRAPHS.items()]
    runs.append(("reddit", pj.PROJECTED_GRAPHS["reddit"], 128))
    for name, graph, hidden in runs:
        _log(f"projection: {name}, hidden {hidden}")
        r = pj.project(graph, CHIP_PRESETS["ecp5"], chips=PROJECTION_CHIPS, fmax_mhz=fmax,
                       hidden=hidden)
        r["clock"] = clock
        projections[name if hidden == 16 else f"{name}, hidden {hidden}"] = r
        rows += pj.table(r)
    return dict(projection=dict(checks=checks, clock=clock, graphs=projections,
                                cycles_error_max=max(abs(c["cycles_error"]) for c in checks),
                                cycles_error_statistics_max=max(
                                    abs(c["cycles_error_statistics"]) for c in checks),
                                bytes_error_max=max(abs(c["bytes_error"]) for c in checks))), rows


# the large graph of the tiling bench: 50,000 nodes, about a million directed edges
LARGE_GRAPH = "synthetic:nodes=50000,degree=22"


def bench_tiling() -> tuple[dict, list[str]]:
    """Graphs larger than the SAE's buffer, in column windows (docs/tiling.md): a
    50,000-node graph for one epoch on the default and ecp5 chips, in three node orders
    (none, rcm, metis) and on 4 default chips (MoP), against the same graph untiled on a
    default chip whose buffer holds it; and Cora on tiny (2,048 rows) against tiny with
    a buffer that holds Cora. The weights must equal golden fixed16's every time."""
    big = load_dataset(LARGE_GRAPH)
    cora = _cora()
    default, tiny = CHIP_PRESETS["default"], CHIP_PRESETS["tiny"]
    cases = [  # (label, dataset, epochs, chip name, chip, reorder)
        ("large, default", big, 1, "default", default, "none"),
        ("large, default, rcm", big, 1, "default", default, "rcm"),
        ("large, default, metis", big, 1, "default", default, "metis"),
        ("large, ecp5", big, 1, "ecp5", CHIP_PRESETS["ecp5"], "none"),
        ("large, untiled", big, 1, "default-64k",
         dataclasses.replace(default, sae=dataclasses.replace(default.sae, max_nodes=65536)),
         "none"),
        ("cora, tiny", cora, 2, "tiny", tiny, "none"),
        ("cora, tiny, rcm", cora, 2, "tiny", tiny, "rcm"),
        ("cora, tiny, metis", cora, 2, "tiny", tiny, "metis"),
        ("cora, untiled", cora, 2, "tiny-4k",
         dataclasses.replace(tiny, sae=dataclasses.replace(tiny.sae, max_nodes=4096)),
         "none"),
    ]
    golden = {}
    runs, rows = {}, [f"Column windows: the {LARGE_GRAPH} graph ({big.num_nodes:,} nodes, "
                      f"{big.edge_index.shape[1]:,} directed edges) and Cora, last epoch"]
    rows.append(f"  {'run':<22} {'buffer':>6} {'cycles/epoch':>12} {'wall s':>7} "
                f"{'loads':>6} {'rows loaded':>11} {'x N':>5}  weights")
    for label, ds, epochs, chip_name, chip, reorder in cases:
        _log(f"tiling: {label} ({epochs} epoch{'s' if epochs > 1 else ''})")
        key = (ds.name, reorder, epochs)
        if key not in golden:
            golden[key] = train(ds, GCNConfig(epochs=epochs), precision="fixed16",
                                reorder=reorder)["weights_sha256"]
        r = _train_rtl(ds, epochs, chip_name, chip, reorder=reorder)
        if r["weights_sha256"] != golden[key]:
            raise RuntimeError(f"{label}: the weights differ from golden fixed16's")
        per_epoch = epochs  # loads are counted over the run: per epoch on average
        runs[label] = dict(chip=chip_name, reorder=reorder, nodes=ds.num_nodes,
                           buffer_rows=chip.sae.max_nodes, epochs=epochs,
                           epoch_cycles=r["epoch_cycles"][-1],
                           epoch_seconds=r["epoch_seconds_median"],
                           buffer_loads=r["buffer_loads"] / per_epoch,
                           buffer_rows_loaded=r["buffer_rows_loaded"] / per_epoch,
                           weights_sha256=r["weights_sha256"])
        x = runs[label]
        rows.append(f"  {label:<22} {x['buffer_rows']:>6} {x['epoch_cycles']:>12,} "
                    f"{x['epoch_seconds']:>7.2f} {x['buffer_loads']:>6.0f} "
                    f"{x['buffer_rows_loaded']:>11,.0f} "
                    f"{x['buffer_rows_loaded'] / ds.num_nodes:>5.1f}  = golden")
    # Mixture of Parallelism on 4 default chips: each aggregates its feature columns of
    # all 50,000 rows, in column windows
    from mixgcn.host.backends import open_chips
    from mixgcn.host.comm import InProcess
    from mixgcn.host.train import Parallel

    _log("tiling: large, 4 chips MoP (1 epoch)")
    chips = open_chips("rtl", 4, chip=default, chip_name="default",
                       on_build=lambda: _log("building the default chip (once)"))
    try:
        r = train(big, GCNConfig(epochs=1), "fixed16", InProcess(chips.backends, owned=False),
                  parallel=Parallel(4, "mop"))
    finally:
        chips.close()
    if r["weights_sha256"] != golden[(big.name, "none", 1)]:
        raise RuntimeError("large, 4 chips MoP: the weights differ from golden fixed16's")
    runs["large, 4 chips MoP"] = dict(chip="default", chips=4, reorder="none",
                                      nodes=big.num_nodes, buffer_rows=default.sae.max_nodes,
                                      epochs=1, epoch_cycles=r["epoch_cycles"][-1],
                                      epoch_seconds=r["epoch_seconds_median"],
                                      buffer_loads=r["buffer_loads"],
                                      buffer_rows_loaded=r["buffer_rows_loaded"],
                                      cycles_per_chip=r["cycles_per_chip"],
                                      weights_sha256=r["weights_sha256"])
    x = runs["large, 4 chips MoP"]
    rows.append(f"  {'large, 4 chips MoP':<22} {x['buffer_rows']:>6} {x['epoch_cycles']:>12,} "
                f"{x['epoch_seconds']:>7.2f} {x['buffer_loads']:>6.0f} "
                f"{x['buffer_rows_loaded']:>11,.0f} "
                f"{x['buffer_rows_loaded'] / big.num_nodes:>5.1f}  = golden "
                "(loads: all 4 chips)")
    large, untiled = runs["large, default"], runs["large, untiled"]
    keys = dict(tiling_runs=runs,
                tiling_large_graph=LARGE_GRAPH,
                tiling_overhead_large=large["epoch_cycles"] / untiled["epoch_cycles"] - 1,
                tiling_overhead_cora_tiny=(runs["cora, tiny"]["epoch_cycles"]
                                           / runs["cora, untiled"]["epoch_cycles"] - 1),
                # the rows of X column windows load, saved by a node order
                tiling_rows_loaded_saved={
                    f"{graph}, {order}": 1 - (runs[f"{graph}, {order}"]["buffer_rows_loaded"]
                                              / runs[graph]["buffer_rows_loaded"])
                    for graph in ("large, default", "cora, tiny")
                    for order in ("rcm", "metis")})
    rows.append(f"  tiling overhead against a buffer that holds the graph: large "
                f"{keys['tiling_overhead_large']:+.1%}, Cora on tiny "
                f"{keys['tiling_overhead_cora_tiny']:+.1%} (cycles per epoch)")
    saved = keys["tiling_rows_loaded_saved"]
    for order in ("rcm", "metis"):
        rows.append(f"  {order} node order: rows of X loaded "
                    f"{saved[f'large, default, {order}']:.1%} fewer on the large graph "
                    f"(default), {saved[f'cora, tiny, {order}']:.1%} on Cora (tiny)")
    return keys, rows


def bench_presets() -> tuple[dict, list[str]]:
    """A Cora epoch on every chip preset (a preset that cannot hold Cora says why)."""
    from mixgcn.host.chip_driver import plan_training

    cora = _cora()
    keys, rows = {}, ["Cora epoch (2nd of 2, pipelined) per chip preset"]
    per = {}
    for name, chip in CHIP_PRESETS.items():
        try:
            plan_training(cora, GCNConfig(epochs=2), chip)
        except ValueError as e:
            per[name] = dict(status="refused", reason=str(e))
            rows.append(f"  {name:<8} cannot hold Cora: {e}")
            continue
        _log(f"presets: 2 Cora epochs on the {name} chip")
        r = _train_rtl(cora, 2, chip_name=name)
        per[name] = dict(epoch_cycles=r["epoch_cycles"][-1], lanes=chip.lanes,
                         sae_macs=chip.lanes * chip.sae.edges,
                         dce_macs=chip.dce.rows * chip.dce.cols,
                         epoch_seconds=r["epoch_seconds_median"])
        rows.append(f"  {name:<8} {r['epoch_cycles'][-1]:>9,} cycles/epoch  "
                    f"({chip.lanes} lanes, SAE {chip.lanes}x{chip.sae.edges}, DCE "
                    f"{chip.dce.rows}x{chip.dce.cols}); {r['epoch_seconds_median']:.2f} s/epoch "
                    "simulated")
    keys["cora_epoch_cycles_per_preset"] = per
    return keys, rows


COMM_CHIPS = (1, 2, 4, 8, 16)
COMM_CONFIGS = (("mop", "contiguous"), ("partition", "contiguous"), ("partition", "metis"))
POWER_LAW = "synthetic:nodes=100000,degree=20"  # power-law degrees, about 2 M directed edges


def bench_comm(out_dir: Path) -> tuple[dict, list[str]]:
    """Bytes between chips per training epoch, and memory per chip, against P: MoP
    beside partition parallelism (contiguous and METIS rows), on the golden backend,
    with docs/parallelism.md's formulas for the same exchanges."""
    from mixgcn.host.comm import InProcess
    from mixgcn.host.train import Parallel

    graphs = []
    try:
        graphs.append(("cora", _cora()))
    except NotRun as e:
        _log(f"comm: Cora skipped: {e}")
    graphs.append(("powerlaw", load_dataset(POWER_LAW)))
    entries = []
    rows = ["Between chips, one training epoch (golden backend, fixed16; 2-layer GCN, hidden "
            "16): bytes moved and the formulas' bytes for the same exchanges",
            f"  {'graph':<9} {'P':>3} {'parallelism':<22} {'total':>13} {'formula':>13} "
            f"{'max/chip':>12} {'all-to-all':>12} {'halo':>12} {'allgather':>12} "
            f"{'memory/chip':>12}"]
    for tag, ds in graphs:
        for chips in COMM_CHIPS:
            for parallelism, partitioner in COMM_CONFIGS:
                _log(f"comm: {tag} on {chips} chips, {parallelism} ({partitioner})")
                r = train(ds, GCNConfig(epochs=1), "fixed16",
                          InProcess([GoldenBackend() for _ in range(chips)]),
                          parallel=Parallel(chips, parallelism, partitioner))
                t = r["epoch_traffic"][0]
                e = dict(graph=tag, nodes=ds.num_nodes, edges=ds.num_edges, chips=chips,
                         parallelism=parallelism, partitioner=partitioner,
                         bytes_total=t["bytes_moved"], bytes_per_chip_max=max(t["bytes_per_chip"]),
                         formula_bytes=t["formula_bytes"], bytes_per_op=t["bytes_per_op"],
                         memory_per_chip_max=max(sum(m.values()) for m in r["memory_per_chip"]),
                         memory_per_chip=r["memory_per_chip"])
                entries.append(e)
                op = t["bytes_per_op"]
                rows.append(f"  {tag:<9} {chips:>3} {parallelism + ' (' + partitioner + ')':<22} "
                            f"{e['bytes_total']:>13,} {e['formula_bytes']:>13,} "
                            f"{e['bytes_per_chip_max']:>12,} {op.get('alltoall', 0):>12,} "
                            f"{op.get('halo', 0):>12,} {op.get('allgather', 0):>12,} "
                            f"{e['memory_per_chip_max']:>12,}")
    rows.append("  (allgather: the weight gradients' right operand, the price of exact "
                "gradients on any P; stats: output-stage statistics, in the total)")
    plot = _plot_comm(entries, out_dir / "comm.png")
    if plot:
        rows.append(f"  plot: {plot}")
    return dict(comm=entries), rows


def _plot_comm(entries: list[dict], path: Path) -> str | None:
    try:
        import matplotlib
    except ImportError:
        _log("comm: no matplotlib, no plot")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    graphs = sorted({e["graph"] for e in entries})
    fig, axes = plt.subplots(1, len(graphs), figsize=(5.5 * len(graphs), 4), squeeze=False)
    for ax, g in zip(axes[0], graphs, strict=True):
        for parallelism, partitioner in COMM_CONFIGS:
            pts = [(e["chips"], e["bytes_per_chip_max"]) for e in entries
                   if e["graph"] == g and e["parallelism"] == parallelism
                   and e["partitioner"] == partitioner and e["chips"] > 1]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o",
                        label=f"{parallelism} ({partitioner})")
        ax.set(xscale="log", yscale="log", xlabel="chips P",
               ylabel="bytes into the busiest chip per epoch", title=g)
        ax.set_xticks(COMM_CHIPS[1:], [str(c) for c in COMM_CHIPS[1:]])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def bench_mop_rtl() -> tuple[dict, list[str]]:
    """Cora on P simulated default chips (P = 1, 2, 4; MoP and METIS partitions): cycles
    of an epoch (each step's slowest chip plus the exchanges at the stated link), each
    chip's cycles, and the simulation's wall time."""
    from mixgcn.host.backends import open_chips
    from mixgcn.host.comm import InProcess
    from mixgcn.host.train import Parallel

    cora = _cora()

    keys, rows = {}, ["Cora on P simulated default chips (2 epochs; the 2nd reported; "
                      "link 10 Gbit/s per chip at 100 MHz)",
                      f"  {'P':>2} {'parallelism':<20} {'epoch cycles':>12} {'exchange':>9} "
                      f"{'per chip (whole run)':<34} {'wall s/epoch':>12}"]
    chips = open_chips("rtl", 4, chip=CHIP_PRESETS["default"], chip_name="default",
                       on_build=lambda: _log("building the default chip (once)"))
    runs = []
    try:
        for p, parallelism, partitioner in ((1, "mop", "contiguous"), (2, "mop", "contiguous"),
                                            (4, "mop", "contiguous"),
                                            (2, "partition", "metis"),
                                            (4, "partition", "metis")):
            _log(f"mop rtl: 2 Cora epochs on {p} chips, {parallelism} ({partitioner})")
            borrowed = InProcess(chips.backends[:p], owned=False)
            r = train(cora, GCNConfig(epochs=2), "fixed16", borrowed,
                      parallel=Parallel(p, parallelism, partitioner))
            runs.append(dict(chips=p, parallelism=parallelism, partitioner=partitioner,
                             epoch_cycles=r["epoch_cycles"][-1],
                             exchange_cycles=r["exchange_cycles"],
                             cycles_per_chip=r["cycles_per_chip"],
                             epoch_seconds=r["epoch_seconds_median"],
                             weights_sha256=r["weights_sha256"]))
            rows.append(f"  {p:>2} {parallelism + ' (' + partitioner + ')':<20} "
                        f"{r['epoch_cycles'][-1]:>12,} {r['exchange_cycles']:>9,} "
                        f"{', '.join(f'{c:,}' for c in r['cycles_per_chip']):<34} "
                        f"{r['epoch_seconds_median']:>12.2f}")
    finally:
        chips.close()
    if len({r["weights_sha256"] for r in runs}) != 1:
        raise RuntimeError("the weights depend on the number of chips: the arithmetic differs")
    keys["mop_rtl_cora"] = runs
    rows.append("  (exchange: the run's exchange cycles, all epochs; every run gave the same "
                "weights)")
    return keys, rows


FABRIC_GRAPHS = {"cora": None, "power-law": "synthetic:nodes=6000,degree=10,features=200"}


def fabric_bound(step: dict, alone: dict) -> int:
    """What a fabric step cannot beat, per chip: its SpMM alone, its GEMM alone (each the
    slowest chip's, measured on the same P chips with the host carrying the exchange),
    and its busiest link (a flit a cycle)."""
    return max([alone[site] for site in step["sites"]] + [step["link_flits"]])


def bench_fabric() -> tuple[dict, list[str]]:
    """The all-to-all on the exchange fabric: Cora (crossbar and serial links) and a
    power-law graph (crossbar), 2 epochs on 1, 2 and 4 simulated default chips. Each
    epoch's cycles, the bytes the links between chips carried, every fabric step's
    cycles against its bound (:func:`fabric_bound`; the kernels alone come from the
    same run with ``--exchange host``), the simulation's wall time; the weights must
    equal one chip's."""
    from mixgcn.host.backends import open_chips, open_system
    from mixgcn.host.train import Parallel

    config = GCNConfig(epochs=2)
    runs, steps = [], []
    rows = ["All-to-all on the exchange fabric (default chips, 2 epochs, the 2nd reported; a "
            "step's bound = max(its SpMM alone, its GEMM alone, its busiest link's flits))",
            f"  {'graph':<10} {'P':>2} {'exchange':<9} {'epoch cycles':>12} "
            f"{'fabric bytes':>12} {'worst step/bound':>16} {'wall s/epoch':>12}"]
    for graph, spec in FABRIC_GRAPHS.items():
        dataset = _cora() if spec is None else load_dataset(spec)
        _log(f"fabric: {graph} on 1 chip")
        one = _train_rtl(dataset, 2)
        sha = one["weights_sha256"]
        runs.append(dict(graph=graph, chips=1, exchange=None,
                         epoch_cycles=one["epoch_cycles"][-1],
                         epoch_seconds=one["epoch_seconds_median"], weights_sha256=sha))
        rows.append(f"  {graph:<10} {1:>2} {'-':<9} {one['epoch_cycles'][-1]:>12,} {0:>12,} "
                    f"{'-':>16} {one['epoch_seconds_median']:>12.2f}")
        for p in (2, 4):
            _log(f"fabric: {graph} on {p} chips, the host carrying the exchange")
            comm = open_chips("rtl", p, chip=CHIP_PRESETS["default"], chip_name="default")
            try:
                host = train(dataset, config, "fixed16", comm,
                             parallel=Parallel(p, partitioner="cyclic"))
            finally:
                comm.close()
            alone = {k: v["last_cycles"] for k, v in host["cycles_per_site"].items()}
            runs.append(dict(graph=graph, chips=p, exchange="host",
                             epoch_cycles=host["epoch_cycles"][-1],
                             epoch_seconds=host["epoch_seconds_median"],
                             weights_sha256=host["weights_sha256"]))
            rows.append(f"  {graph:<10} {p:>2} {'host':<9} {host['epoch_cycles'][-1]:>12,} "
                        f"{0:>12,} {'-':>16} {host['epoch_seconds_median']:>12.2f}")
            for kind in (("crossbar", "serial") if graph == "cora" else ("crossbar",)):
                _log(f"fabric: {graph} on {p} chips, {kind}")
                comm = open_system(p, kind, on_build=lambda: _log(
                    "building the system (once per P and fabric)"))
                try:
                    r = train(dataset, config, "fixed16", comm,
                              parallel=Parallel(p, exchange="fabric", fabric=kind))
                finally:
                    comm.close()
                if {r["weights_sha256"], host["weights_sha256"]} != {sha}:
                    raise RuntimeError(f"{graph} on {p} chips ({kind}): the weights differ "
                                       "from one chip's")
                mine = [dict(s, graph=graph, chips=p, fabric=kind,
                             alone=[alone[site] for site in s["sites"]],
                             bound=fabric_bound(s, alone),
                             ratio=s["cycles"] / max(1, fabric_bound(s, alone)))
                        for s in r["fabric_steps"]]
                steps += mine
                worst = max((s["ratio"] for s in mine), default=0.0)
                runs.append(dict(graph=graph, chips=p, exchange=kind,
                                 epoch_cycles=r["epoch_cycles"][-1],
                                 fabric_bytes=r["fabric_bytes"],
                                 epoch_seconds=r["epoch_seconds_median"],
                                 weights_sha256=r["weights_sha256"], worst_ratio=worst))
                rows.append(f"  {graph:<10} {p:>2} {kind:<9} {r['epoch_cycles'][-1]:>12,} "
                            f"{r['fabric_bytes']:>12,} {worst:>16.3f} "
                            f"{r['epoch_seconds_median']:>12.2f}")
    rows.append("  every fabric step (pairs run once the exponents are known, from the 2nd "
                "epoch): cycles; SpMM, GEMM alone; busiest link; ratio to the bound")
    for s in steps:
        rows.append(f"    {s['graph']:<10} P={s['chips']} {s['fabric']:<9} "
                    f"{'+'.join(s['sites']):<24} {s['cycles']:>8,}  "
                    f"{' / '.join(f'{a:,}' for a in s['alone']):<16} {s['link_flits']:>7,} "
                    f"{s['ratio']:>6.3f}")
    return dict(fabric=dict(runs=runs, steps=steps)), rows


# (board, chip preset, chips on the FPGA): every preset that could fit each board
# (board, chip preset, chips, fabric): crossbar = the chips on one FPGA, serial = a chip
# per board (a bitstream each)
BOARD_BUILDS = [("ulx3s-85f", "micro", 1, "crossbar"), ("ulx3s-85f", "tiny", 1, "crossbar"),
                ("ulx3s-85f", "ecp5", 1, "crossbar"), ("ulx3s-85f", "micro", 2, "serial"),
                ("ecpix5-85f", "ecp5", 1, "crossbar"), ("ecpix5-85f", "micro", 2, "crossbar"),
                ("ecpix5-85f", "tiny", 2, "crossbar"), ("ecpix5-85f", "ecp5", 2, "crossbar"),
                ("icebreaker", "micro", 1, "crossbar")]


# each build's place and route stops after this long (nextpnr has no limit of its own):
# the `ecp5` chip routes in 25-90 minutes here, the explored chip (within 70 % of the
# multipliers) in 58; the 8 x 8 chip it replaced had not routed after 77
PNR_MINUTES = 180


def _explored_chip():
    """The chip ``mixgcn explore --dataset cora --budget ecp5-85f`` chooses (the
    performance model only, about a minute), or None without Cora."""
    from mixgcn.gen.resources import ECP5_PARTS

    try:
        cora = _cora()
    except NotRun as e:
        _log(f"boards: the explored chip is not built ({e})")
        return None
    _log("boards: exploring Cora on ecp5-85f on the performance model")
    return _explore_cora(cora, ECP5_PARTS["ecp5-85f"])[0]


def bench_boards():
    """Each of :data:`BOARD_BUILDS` built with the open toolchain (tens of minutes each
    for the larger chips), then the chip exploration chooses for Cora on the ECP5-85F
    on the ULX3S: resources and Fmax from nextpnr's report, or the one-line reason it
    does not fit."""
    from mixgcn.gen.board import BoardError, build_board

    builds, rows = [], ["boards (YoWASP yosys + nextpnr; figures from nextpnr's report)",
                        f"  {'board':<11} {'chips':>5} {'fabric':<8} {'chip':<8} {'LUT4':>7} "
                        f"{'FF':>7} "
                        f"{'DSP':>4} {'BRAM':>4} {'Fmax':>7} {'target':>6} {'met':<4} "
                        f"{'build s':>8}"]
    jobs = [(board, chip, CHIP_PRESETS[chip], chips, fabric)
            for board, chip, chips, fabric in BOARD_BUILDS]
    explored = _explored_chip()
    if explored is not None:
        jobs.append(("ulx3s-85f", "explored", explored.config, 1, "crossbar"))
    for board, chip, config, chips, fabric in jobs:
        _log(f"boards: {chips} x {chip} on {board} ({fabric})")
        kind = "-serial" if fabric == "serial" else ""
        out = Path("build/board") / f"{board}-{chips}x{chip}{kind}"
        try:
            r = build_board(board, config, chip_name=chip, chips=chips,
                            fabric=fabric, out=out, pnr_minutes=PNR_MINUTES, progress=_log)
        except BoardError as e:
            builds.append(dict(board=board, chip=chip, chips=chips, fabric=fabric,
                               error=str(e)))
            rows.append(f"  {board:<11} {chips:>5} {fabric:<8} {chip:<8} {e}")
            continue
        if chip == "explored":
            r["explored"] = explored.to_dict()
        builds.append(r)
        rows.append(f"  {board:<11} {chips:>5} {fabric:<8} {chip:<8} {r['lut4']:>7,} "
                    f"{r['ff']:>7,} "
                    f"{r['dsp']:>4} {r['bram']:>4} "
                    f"{'-' if r['fmax_mhz'] is None else format(r['fmax_mhz'], '.2f'):>7} "
                    f"{r['target_mhz']:>6.0f} {'yes' if r['timing_met'] else 'no':<4} "
                    f"{sum(r['seconds_per_stage'].values()):>8.0f}")
    if explored is not None:
        rows.append(f"  explored: {explored.label()} (mixgcn explore --dataset cora "
                    "--budget ecp5-85f)")
    return dict(boards=builds), rows


def bench_link() -> tuple[dict, list[str]]:
    """The host link's throughput, measured on the simulated board top: the default
    chip behind its link at the ULX3S's chip clock and the default line rate, full
    WRITE and READ frames timed in the board's clock cycles (every byte of the frames,
    the executor's work and the answers). Then what that means for a Cora epoch: the
    words the host moves to and from the chip in one epoch (counted by an ``rtl`` run:
    the difference of 2 epochs and 1) at the measured rates, beside the epoch's own
    cycles at that clock — an implied figure, labelled so."""
    from mixgcn.gen.board import BOARDS
    from mixgcn.hdl.uart import divisor_for
    from mixgcn.host.backends import DEFAULT_BAUD
    from mixgcn.host.board import BoardDevice
    from mixgcn.sim.board.process import SimulatedSerialPort

    board, chip = BOARDS["ulx3s-85f"], CHIP_PRESETS["default"]
    clock, baud = board.chip_hz, DEFAULT_BAUD
    divisor = divisor_for(clock, baud)
    _log(f"link: the default chip's board top at {clock / 1e6:g} MHz, {baud:,} baud "
         f"({divisor} cycles a bit)")
    with SimulatedSerialPort(chip, divisor=divisor,
                             on_build=lambda: _log("building the board top (once)")) as port:
        dev = BoardDevice(chip, port, clock_hz=clock, timeout=0.05)
        ll = dev.layouts
        words = np.random.default_rng(0).integers(0, 256, (4 * ll.max_write_words,
                                                           ll.mem_bytes), dtype=np.uint8)
        start = port.cycles
        dev.write(0, words)
        write_cycles = port.cycles - start
        start = port.cycles
        back = dev.read(0, len(words))
        read_cycles = port.cycles - start
        if not np.array_equal(back, words):
            raise RuntimeError("the link's bench read back other words than it wrote")
        resent = dev.link.resent
    payload = words.nbytes
    write_bps, read_bps = payload * clock / write_cycles, payload * clock / read_cycles
    line_bps = clock / divisor / 10  # the rate the divisor makes (8N1: ten bits a byte)
    cora = _cora()
    _log("link: Cora on the default chip (rtl), 1 and 2 epochs, for the words the host "
         "moves per epoch")
    one, two = _train_rtl(cora, 1), _train_rtl(cora, 2)
    to_chip = two["memory_words_written"] - one["memory_words_written"]
    from_chip = two["memory_words_read"] - one["memory_words_read"]
    epoch_cycles = two["epoch_cycles"][-1]
    link_s = (to_chip * ll.mem_bytes / write_bps + from_chip * ll.mem_bytes / read_bps)
    chip_s = epoch_cycles / clock
    rows = [f"Host link (measured in simulation of the board top: default chip, "
            f"{clock / 1e6:g} MHz, {baud:,} baud, {divisor} cycles a bit)",
            f"  line: {line_bps:,.0f} bytes/s each way (8N1 at {clock / divisor:,.0f} "
            f"baud, what {divisor} cycles a bit make); {len(words)} words "
            f"({payload:,} bytes) in {-(-len(words) // ll.max_write_words)} frames each way",
            f"  WRITE: {write_cycles:,} cycles, {write_bps:,.0f} payload bytes/s "
            f"({write_bps / line_bps:.1%} of the line)",
            f"  READ:  {read_cycles:,} cycles, {read_bps:,.0f} payload bytes/s "
            f"({read_bps / line_bps:.1%} of the line); {resent} requests sent again",
            f"  implied for a Cora epoch (the 2nd): the host writes {to_chip:,} words and "
            f"reads {from_chip:,} ({(to_chip + from_chip) * ll.mem_bytes / 1e6:.2f} MB): "
            f"{link_s:.1f} s on the link, against {chip_s * 1e3:.2f} ms of chip time "
            f"({epoch_cycles:,} cycles at {clock / 1e6:g} MHz)"]
    return dict(link=dict(board="ulx3s-85f", clock_hz=clock, baud=baud, divisor=divisor,
                          frame_words=len(words), payload_bytes=payload,
                          write_cycles=write_cycles, read_cycles=read_cycles,
                          write_bytes_per_second=write_bps, read_bytes_per_second=read_bps,
                          line_bytes_per_second=line_bps, resent=resent,
                          cora_epoch_words_to_chip=to_chip,
                          cora_epoch_words_from_chip=from_chip,
                          cora_epoch_cycles=epoch_cycles,
                          cora_epoch_link_seconds_implied=link_s,
                          cora_epoch_chip_seconds_implied=chip_s)), rows


SECTIONS = {"golden": bench_golden, "dce": bench_dce, "sae": bench_sae, "rtl": bench_rtl,
            "presets": bench_presets, "memory": bench_memory, "tiling": bench_tiling,
            "comm": bench_comm,
            "mop_rtl": bench_mop_rtl,
            "fabric": bench_fabric, "link": bench_link, "model": bench_model,
            "explore": bench_explore, "projection": bench_projection, "peers": bench_peers,
            "boards": bench_boards}
# sections run only when named with --only: the board builds (make bench-boards, an hour
# or more) and the peers (make bench-peers: torch, an optional extra)
SLOW_SECTIONS = {"boards", "peers"}
# make bench-quick: the sections that take a few minutes together (about 8 on this 2-core
# machine beside another job; the engines' own sections and the link's take longer)
QUICK_SECTIONS = ("golden", "rtl", "presets", "model", "explore", "projection")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mixgcn-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench/results.json"))
    p.add_argument("--only", choices=sorted(SECTIONS), action="append",
                   help="run only these sections (repeatable); the others are recorded "
                        "as not run")
    p.add_argument("--quick", action="store_true",
                   help=f"run only the quick sections ({', '.join(QUICK_SECTIONS)})")
    args = p.parse_args(argv)
    if args.quick and args.only:
        p.error("--quick and --only choose the sections two ways: give one")
    chosen = (args.only or (QUICK_SECTIONS if args.quick else
                            [s for s in SECTIONS if s not in SLOW_SECTIONS]))
    results = dict(sections={})
    table = []
    for name in SECTIONS:
        if name not in chosen:
            why = ("a slow section: --only " + name if name in SLOW_SECTIONS
                   else "not in the quick suite" if args.quick else "not selected (--only)")
            results["sections"][name] = dict(status="not run", reason=why)
            continue
        t0 = time.perf_counter()
        try:
            keys, rows = (SECTIONS[name](args.out.parent) if name == "comm"
                          else SECTIONS[name]())
        except NotRun as e:
            _log(f"{name}: not run: {e}")
            results["sections"][name] = dict(status="not run", reason=str(e))
            table += [f"{name}: not run ({e})", ""]
            continue
        seconds = time.perf_counter() - t0
        results.update(keys)
        results["sections"][name] = dict(status="measured", seconds=seconds)
        _log(f"{name}: {seconds:.1f} s")
        table += [*rows, f"  ({name}: {seconds:.1f} s)", ""]
    results["machine"] = dict(python=platform.python_version(), cpus=os.cpu_count(),
                              numpy=np.__version__)
    results["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    text = "\n".join(table)
    args.out.with_suffix(".txt").write_text(text + "\n")
    from mixgcn.host.bench_report import write_report

    report = write_report(results, text, args.out)
    print(text)
    print(f"results: {args.out}, {args.out.with_suffix('.txt')} and {report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
