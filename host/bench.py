"""``make bench``: measure, never assert. Writes one JSON object plus a readable table.

Each section returns ``(keys, table_rows)``; keys are merged into the results object
(later sections add keys, none is ever renamed). Run ``python -m mixgcn.host.bench
--only golden`` to run one section.
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

from mixgcn.golden.datasets import DatasetError, default_data_dir, load_dataset
from mixgcn.golden.gcn import GCNConfig
from mixgcn.host.train import train


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def bench_golden() -> tuple[dict, list[str]]:
    """Wall time of a golden training epoch (Cora when present, synthetic graphs)."""
    keys, rows = {}, ["golden model: median epoch wall time (forward + backward + Adam)"]
    datasets = []
    try:
        datasets.append(("cora", load_dataset("cora", default_data_dir())))
    except DatasetError as e:
        _log(f"Cora skipped: {e}")
    datasets.append(("synthetic", load_dataset("synthetic")))
    datasets.append(("synthetic_1m", load_dataset("synthetic:nodes=100000,degree=20")))
    for tag, ds in datasets:
        for precision in ("float32", "fixed16"):
            epochs = 200 if ds.num_nodes < 10_000 else 5
            _log(f"golden {tag} {precision}: {epochs} epochs")
            r = train(ds, GCNConfig(epochs=epochs), precision=precision)
            keys[f"golden_{tag}_epoch_seconds_{precision}"] = r["epoch_seconds_median"]
            rows.append(f"  {tag:<13} {ds.num_nodes:>7} nodes {ds.num_edges:>8} edges  "
                        f"{precision:<8} {r['epoch_seconds_median'] * 1e3:9.2f} ms/epoch  "
                        f"test acc {r['test_accuracy']:.3f}")
    return keys, rows


def dce_cases(config) -> list[dict]:
    """Cora-shaped work: 2708 rows, reductions from 16 to 1433 (Cora's features)."""
    n, m = 2708, config.cols
    cases = [dict(op="xw", n=n, k=k, m=m) for k in (16, 32, 48, 64, 128, 256, 512, 1433)]
    cases += [dict(op="xwt", n=n, k=k, m=m) for k in (16, 64, 1433)]
    cases.append(dict(op="xtg", n=n, k=config.rows, m=m))  # reduction over the 2708 rows
    cases.append(dict(op="xw", n=n, k=1433, m=7))  # Cora's 7 classes: a narrow tile
    return cases


def _run_harness(kind: str, harness, config, cases: list[dict], extra: dict | None = None):
    """Simulate ``harness`` (Verilog built once per configuration) over ``cases``."""
    import tempfile

    from amaranth.back import verilog

    from mixgcn.sim.runner import config_env, run_cocotb

    src = verilog.convert(harness, name="harness", emit_src=False)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        env = config_env("MIXGCN_ENGINE_CONFIG", config)
        env.update(MIXGCN_BENCH_KIND=kind, MIXGCN_BENCH_CASES=json.dumps(cases),
                   MIXGCN_BENCH_OUT=str(out), **(extra or {}))
        run_cocotb(src, "harness", "mixgcn.sim.bench_harness", extra_env=env)
        return json.loads(out.read_text())


def bench_dce(preset: str = "default") -> tuple[dict, list[str]]:
    """DCE utilisation = useful MACs / (MACs × cycles), simulated RTL, no backpressure."""
    from mixgcn.gen.config import DCE_PRESETS
    from mixgcn.sim.harness import Harness, dce_feed

    cfg = DCE_PRESETS[preset]
    cases = dce_cases(cfg)
    _log(f"dce: building the {preset} harness ({cfg.rows}x{cfg.cols}) and running "
         f"{len(cases)} cases")
    depth = 4096
    results = _run_harness("dce", Harness([dce_feed(cfg, depth)]), cfg, cases,
                           dict(MIXGCN_HARNESS_DEPTH=str(depth)))
    for r in results:
        r["fill_drain_cycles"] = r["cycles"] - r["steady_cycles"] - r["weight_load_cycles"]
    long = [r for r in results if r["reduction"] >= 4 * cfg.rows and r["m"] == cfg.cols]
    keys = dict(dce_utilisation=min(r["utilisation"] for r in long), dce_cases=results,
                dce_preset=preset)
    rows = [f"DCE ({preset}: {cfg.rows}x{cfg.cols} MACs), Cora-shaped, no backpressure",
            f"  {'op':<4} {'N':>5} {'K':>5} {'M':>3} {'cycles':>9} {'ideal':>9} "
            f"{'load':>5} {'fill+drain':>10} {'util':>7}  verified"]
    for r in results:
        rows.append(f"  {r['op']:<4} {r['n']:>5} {r['k']:>5} {r['m']:>3} {r['cycles']:>9} "
                    f"{r['ideal_cycles']:>9} {r['weight_load_cycles']:>5} "
                    f"{r['fill_drain_cycles']:>10} {r['utilisation']:>7.2%}  {r['verified']}")
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
        graphs["cora"] = load_dataset("cora", default_data_dir())
    except DatasetError as e:
        _log(f"Cora skipped: {e}")
    graphs["powerlaw"] = load_dataset("synthetic:nodes=8000,degree=16")
    return {name: fixed.quantize(normalized_adjacency(ds.edge_index, ds.num_nodes), 16).mant
            for name, ds in graphs.items()}


def bench_sae(preset: str = "default") -> tuple[dict, list[str]]:
    """SAE utilisation = nnz·F / (L·E·cycles) for E = 1 and E = 4, one pass (F = L) and
    four (F = 4L: the next slice loads while the current one is aggregated)."""
    import dataclasses
    import tempfile

    from mixgcn.gen.config import SAE_PRESETS
    from mixgcn.sim.harness import Harness, sae_feed

    base = SAE_PRESETS[preset]
    graphs = sae_graphs()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for name, s in graphs.items():
            path = Path(tmp) / f"{name}.npz"
            np.savez(path, data=s.data, indices=s.indices, indptr=s.indptr,
                     shape=np.array(s.shape))
            cases += [dict(name=name, graph=str(path), passes=p) for p in (1, 4)]
        for edges in (1, 4):
            cfg = dataclasses.replace(base, edges=edges)
            beats = max(int(np.maximum(1, -(-np.diff(s.indptr) // edges)).sum())
                        for s in graphs.values())
            depth = 1 << (beats - 1).bit_length()
            _log(f"sae: E={edges}: building the harness ({cfg.lanes} lanes, {depth}-beat CSR "
                 f"memory) and running {len(cases)} cases")
            results += _run_harness("sae", Harness([sae_feed(cfg, depth)]), cfg, cases)
    keys = {}
    for e in (1, 4):
        (r,) = [r for r in results
                if r["edges"] == e and r["graph"] == "powerlaw" and r["passes"] == 4]
        keys[f"sae_utilisation_e{e}"] = r["utilisation"]
    keys.update(sae_cases=results, sae_preset=preset)
    rows = [f"SAE ({preset}: L={base.lanes} lanes), no backpressure",
            f"  {'graph':<9} {'E':>2} {'F':>4} {'nnz':>7} {'beats/pass':>10} {'cycles':>9} "
            f"{'ideal':>9} {'util':>7}  verified"]
    for r in results:
        rows.append(f"  {r['graph']:<9} {r['edges']:>2} {r['features']:>4} {r['nnz']:>7} "
                    f"{r['beats_per_pass']:>10} {r['cycles']:>9} {r['ideal_cycles']:>9} "
                    f"{r['utilisation']:>7.2%}  {r['verified']}")
    rows.append(f"  sae_utilisation_e1 / _e4 (power-law, F = 4L): "
                f"{keys['sae_utilisation_e1']:.2%} / {keys['sae_utilisation_e4']:.2%}")
    return keys, rows


# kernel kinds the SAE runs (every other kind runs on the DCE)
SAE_KINDS = {"spmm", "gemm_xw_sparse", "gemm_xtg_sparse"}


def pipeline_report(alone: dict, piped: dict) -> tuple[list[dict], list[dict]]:
    """Compare two runs of the same training (every kernel alone / pipelined), from
    their ``cycles_per_site`` (the last execution of each site: the same call in both
    runs, as the arithmetic and so the whole run are identical).

    Returns the pairs — ``A+B`` pipelined (one feeds the other through the exchange
    port), ``A|B`` side by side (independent, one on each engine) — with the cycles of
    each kernel alone, their sum, the pair's cycles, overlap and ratio to the slower
    one alone; and the layer stages (``L1.bwd``: the kernels of a layer's forward or
    backward; SAE alone / DCE alone sum each engine's kernels; a side-by-side pair's
    cycles count in its first kernel's stage)."""
    def parts(site):
        return site.replace("|", "+").split("+")

    pairs = []
    for site, rec in piped.items():
        if len(parts(site)) == 1:
            continue
        a, b = (alone[p]["last_cycles"] for p in parts(site))
        c = rec["last_cycles"]
        pairs.append(dict(site=site, kind=rec["kind"], first=a, second=b, sum=a + b,
                          pipelined=c, overlap=a + b - c, ratio=c / max(a, b)))
    stages = {}
    for site, rec in alone.items():
        st = stages.setdefault(site.rsplit(".", 1)[0],
                               dict(sae=0, dce=0, pipelined=0, kernels=0))
        st["sae" if rec["kind"] in SAE_KINDS else "dce"] += rec["last_cycles"]
        st["kernels"] += 1
    # a pair's first execution ran its kernels alone (see RTLBackend.summary): in the
    # pipelined run, only the pair counts
    paired = {p for site in piped if len(parts(site)) > 1 for p in parts(site)}
    for site, rec in piped.items():
        if site not in paired:  # a batch of two kernels counts in its first one's stage
            stages[parts(site)[0].rsplit(".", 1)[0]]["pipelined"] += rec["last_cycles"]
    out = []
    for name, st in stages.items():
        st.update(stage=name, sum=st["sae"] + st["dce"],
                  ratio=st["pipelined"] / max(st["sae"], st["dce"]))
        st["overlap"] = st["sum"] - st["pipelined"]
        out.append(st)
    return pairs, sorted(out, key=lambda st: st["stage"])


def bench_rtl() -> tuple[dict, list[str]]:
    """Training Cora on the simulated chip: cycles and wall time per epoch, the
    fine-grain pipeline (each kernel alone vs pipelined, per fused pair and per layer
    stage) and node reordering (none vs rcm)."""
    from mixgcn.golden.gcn import GCNConfig
    from mixgcn.sim.rtl_backend import train_rtl

    try:
        load_dataset("cora", default_data_dir())
    except DatasetError as e:
        _log(f"rtl skipped: {e}")
        return {}, ["RTL backend: skipped (no Cora)"]
    epochs = 3
    runs = {}
    for reorder in ("none", "rcm"):
        for pipeline in (False, True):
            _log(f"rtl: {epochs} Cora epochs on the simulated chip, reorder {reorder}, "
                 f"{'pipelined' if pipeline else 'every kernel alone'}")
            runs[reorder, pipeline] = train_rtl(dict(
                dataset="cora", data_dir=str(default_data_dir()), quiet=True,
                reorder=reorder, pipeline=pipeline,
                config=dataclasses.asdict(GCNConfig(epochs=epochs))))
    r = runs["none", True]
    cycles = r["epoch_cycles"][-1]
    seconds = r["epoch_seconds_median"]
    keys = dict(cora_epoch_cycles=cycles, rtl_cora_epoch_seconds=seconds,
                rtl_cycles_per_second=cycles / seconds, rtl_level="chip (descriptors)",
                # the simulator alone, without the host's work between batches
                rtl_sim_cycles_per_second=r["cycles"] / r["sim_seconds"],
                rtl_host_seconds_share=1 - r["sim_seconds"] / r["wall_seconds"])
    rows = ["RTL backend: Cora on the simulated chip (SAE 16 lanes x 2 pipelines, DCE 16x16)"]
    for reorder in ("none", "rcm"):
        alone, piped = runs[reorder, False], runs[reorder, True]
        assert alone["weights_sha256"] == piped["weights_sha256"]  # same arithmetic
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
    rows.append(f"  pipeline_ratio (worst fused pair) {keys['pipeline_ratio']:.3f} "
                f"(rcm {keys['pipeline_ratio_rcm']:.3f}); worst layer stage "
                f"{keys['layer_ratio_worst']:.3f} (rcm {keys['layer_ratio_worst_rcm']:.3f})")
    rows.append(f"  rcm reordering: {keys['reorder_epoch_cycles_saved']:.1%} fewer cycles "
                f"per epoch")
    rows.append(f"  simulation: {keys['rtl_cycles_per_second']:,.0f} cycles per wall second "
                f"of an epoch; the simulator alone {keys['rtl_sim_cycles_per_second']:,.0f} "
                f"cycles/s; host work (operand layout, memory writes and reads, "
                f"Adam) {keys['rtl_host_seconds_share']:.0%} of the wall time")
    return keys, rows


SECTIONS = {"golden": bench_golden, "dce": bench_dce, "sae": bench_sae, "rtl": bench_rtl}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mixgcn-bench", description=__doc__)
    p.add_argument("--out", type=Path, default=Path("bench/results.json"))
    p.add_argument("--only", choices=sorted(SECTIONS), action="append",
                   help="run only these sections (repeatable)")
    args = p.parse_args(argv)
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    table = []
    for name in args.only or SECTIONS:
        t0 = time.perf_counter()
        keys, rows = SECTIONS[name]()
        results.update(keys)
        table += [*rows, f"  ({name}: {time.perf_counter() - t0:.1f} s)", ""]
    results["machine"] = dict(python=platform.python_version(), cpus=os.cpu_count(),
                              numpy=np.__version__)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    text = "\n".join(table)
    args.out.with_suffix(".txt").write_text(text + "\n")
    print(text)
    print(f"results: {args.out} and {args.out.with_suffix('.txt')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
