"""The bench's readable results: ``RESULTS.md`` and its plots, written from one run's
``results.json`` — never edited by hand, never holding a figure the run did not
measure (a figure whose section did not run says so).

``python -m mixgcn.host.bench_report bench/results.json`` writes them again from a
results file (``make bench`` does it after every run).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["HEADLINES", "PLOTS", "headline_rows", "plots", "write_report"]

# every plot the bench draws
PLOTS = ("utilisation.png", "pipeline.png", "epochs.png", "model.png", "comm.png",
         "projection.png")


def _get(results: dict, path: str):
    """``results`` at a dotted path, or None where any part is missing."""
    v = results
    for part in path.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return v


def _pct(v) -> str:
    return f"{v:.1%}"


def _int(v) -> str:
    return f"{v:,}"


# (label, key path in results.json, format, section that measures it)
HEADLINES: list[tuple[str, str, Callable, str]] = [
    ("Cora test accuracy, golden float32 (200 epochs)", "golden_cora_test_accuracy_float32",
     "{:.3f}".format, "golden"),
    ("Cora test accuracy, golden fixed16 (200 epochs)", "golden_cora_test_accuracy_fixed16",
     "{:.3f}".format, "golden"),
    ("Cora epoch on the `default` chip (cycles, RTL, ideal memory)", "cora_epoch_cycles",
     _int, "rtl"),
    ("Fine-grain pipeline: worst pair, pipelined / max(alone)", "pipeline_ratio",
     "{:.3f}".format, "rtl"),
    ("RTL simulation speed (chip cycles per wall second, simulator alone)",
     "rtl_sim_cycles_per_second", "{:,.0f}".format, "rtl"),
    ("Cora epoch on the `ecp5` chip (cycles, RTL)",
     "cora_epoch_cycles_per_preset.ecp5.epoch_cycles", _int, "presets"),
    ("Performance model: worst error of any operation on Cora (ideal memory)",
     "model_error_max", "{:.2%}".format, "model"),
    ("Whole-chip utilisation on Cora, `default` chip", "chip_utilisation.default.utilisation",
     _pct, "model"),
    ("Whole-chip utilisation on Cora, `ecp5` chip", "chip_utilisation.ecp5.utilisation",
     _pct, "model"),
    ("Explored ECP5-85F chip: Cora epoch (cycles, RTL)",
     "explore.measured.explored.epoch_cycles_rtl", _int, "explore"),
    ("Explored ECP5-85F chip: whole-chip utilisation (RTL)",
     "explore.measured.explored.utilisation_rtl", _pct, "explore"),
    ("Projection: worst epoch-cycle error against the descriptor model, Â known",
     "projection.cycles_error_max", "{:.1%}".format, "projection"),
    ("Projection: the same, from the statistics alone (as for the large graphs)",
     "projection.cycles_error_statistics_max", "{:.1%}".format, "projection"),
    ("Cora epoch on LiteDRAM's ULX3S SDRAM, times the ideal memory",
     "cora_epoch_cycles_per_memory.ulx3s-litedram.vs_ideal", "{:.1f}x".format, "memory"),
    ("Host link: payload written (bytes/s at the configured baud)",
     "link.write_bytes_per_second", "{:,.0f}".format, "link"),
]


def headline_rows(results: dict) -> list[str]:
    """The headline table (markdown): each figure, or why it is missing."""
    rows = ["| figure | value |", "|---|---|"]
    sections = results.get("sections", {})
    for label, path, fmt, section in HEADLINES:
        v = _get(results, path)
        if v is None:
            st = sections.get(section, {})
            why = st.get("reason", "not measured") if st.get("status") != "measured" \
                else "not measured"
            rows.append(f"| {label} | — ({section}: {why}) |")
        else:
            rows.append(f"| {label} | {fmt(v)} |")
    for b in results.get("boards", []) or []:
        if b.get("fmax_mhz") is not None:
            rows.append(f"| {b['board']}, {b['chips']} x `{b['chip']}`: Fmax (nextpnr) | "
                        f"{b['fmax_mhz']:.2f} MHz ({b['lut4']:,} LUT4) |")
    return rows


def plots(results: dict, out_dir: Path, prefix: str = "") -> list[Path]:
    """The plots this run's figures allow (PNG, matplotlib); [] without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print("bench: no matplotlib, no plots", file=sys.stderr)
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []

    def save(fig, name):
        fig.tight_layout()
        path = out_dir / f"{prefix}{name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)

    util = results.get("chip_utilisation")
    if util:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        names = list(util)
        total = [util[n]["cycles"] for n in names]
        ax.bar([x - 0.27 for x in range(len(names))], [u["utilisation"] for u in util.values()],
               0.27, label="whole chip (useful MACs / cycles x multipliers)")
        ax.bar(range(len(names)), [u["sae_busy"] / t for u, t in zip(util.values(), total,
                                                                      strict=True)],
               0.27, label="sparse engine busy")
        ax.bar([x + 0.27 for x in range(len(names))],
               [u["dce_busy"] / t for u, t in zip(util.values(), total, strict=True)], 0.27,
               label="dense engine busy")
        ax.set_xticks(range(len(names)), names)
        ax.set(ylabel="share of the run's cycles", ylim=(0, 1),
               title="Cora, 2 epochs, RTL (ideal memory)")
        ax.legend(fontsize=8)
        save(fig, "utilisation.png")

    stages = results.get("layer_stages")
    if stages:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        names = [s["stage"] for s in stages]
        for i, (key, label) in enumerate((("sae", "SpMM alone"), ("dce", "GEMM alone"),
                                          ("pipelined", "pipelined"))):
            ax.bar([x + (i - 1) * 0.27 for x in range(len(names))], [s[key] for s in stages],
                   0.27, label=label)
        ax.set_xticks(range(len(names)), names)
        ax.set(ylabel="cycles", title="The fine-grain pipeline per layer stage (Cora, RTL)")
        ax.legend(fontsize=8)
        save(fig, "pipeline.png")

    presets = results.get("cora_epoch_cycles_per_preset")
    memory = results.get("cora_epoch_cycles_per_memory")
    panels = [p for p in (("presets", presets), ("memory", memory)) if p[1]]
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.5),
                                 squeeze=False)
        for ax, (kind, data) in zip(axes[0], panels, strict=True):
            if kind == "presets":
                ok = {n: p["epoch_cycles"] for n, p in data.items() if "epoch_cycles" in p}
                ax.bar(list(ok), list(ok.values()))
                ax.set(ylabel="cycles per Cora epoch", title="per chip preset (RTL)")
            else:
                vals = {}
                for name, m in data.items():
                    c = m["epoch_cycles"]
                    vals[name] = min(c.values()) if isinstance(c, dict) else c
                ax.bar(list(vals), list(vals.values()))
                ax.set(yscale="log", ylabel="cycles per Cora epoch",
                       title="`default` chip per memory (RTL)")
                ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        save(fig, "epochs.png")

    errors = results.get("model_errors_by_memory")
    if errors:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        kinds = sorted({k for e in errors.values() for k in e})
        width = 0.8 / len(errors)
        for i, (mem, e) in enumerate(errors.items()):
            ax.bar([x + (i - (len(errors) - 1) / 2) * width for x in range(len(kinds))],
                   [e.get(k, 0) for k in kinds], width, label=mem)
        ax.set_xticks(range(len(kinds)), kinds, rotation=30, fontsize=7)
        ax.set(ylabel="worst |model - RTL| / RTL", yscale="log",
               title="Performance model against the RTL, per operation (Cora)")
        ax.legend(fontsize=8)
        save(fig, "model.png")
    proj = _get(results, "projection.graphs")
    if proj:
        fig, axes = plt.subplots(1, len(proj), figsize=(4.2 * len(proj), 3.6), squeeze=False)
        for ax, (name, r) in zip(axes[0], proj.items(), strict=True):
            for par in ("mop", "partition"):
                pts = [(row["chips"], row["epoch_seconds"]) for row in r["rows"]
                       if row["parallelism"] == par]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=par)
            ax.set(xscale="log", yscale="log", xlabel="chips P", ylabel="seconds per epoch",
                   title=f"{name} (model output)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Projected training epoch, ecp5 chip at {r['fmax_mhz']:.2f} MHz",
                     fontsize=9)
        save(fig, "projection.png")
    return made


def write_report(results: dict, table: str, results_path: Path) -> Path:
    """The readable report beside ``results_path`` (a results JSON) and its plots:
    ``RESULTS.md`` for ``results.json``, ``<name>.md`` and ``<name>-*.png`` for any other
    (``make bench-boards`` and ``make bench-peers`` never overwrite the main run's)."""
    out_dir, stem = results_path.parent, results_path.stem
    prefix = "" if stem == "results" else f"{stem}-"
    pngs = plots(results, out_dir, prefix)
    comm = out_dir / "comm.png"  # the comm section draws its own
    if comm.exists() and results.get("comm"):
        pngs.append(comm)
    for stale in PLOTS:  # a plot of this name this run did not draw is an older run's
        if stale == "comm.png" and prefix:
            continue
        if out_dir / f"{prefix}{stale}" not in pngs:
            (out_dir / f"{prefix}{stale}").unlink(missing_ok=True)
    sections = results.get("sections", {})
    lines = ["# mixgcn bench results",
             "",
             f"Written by `make bench` on {results.get('date', '?')} "
             f"(Python {_get(results, 'machine.python')}, "
             f"{_get(results, 'machine.cpus')} CPUs). Every figure below was measured by "
             "this run; a section that did not run is listed with its reason. This file is "
             "regenerated by every run; do not edit it.",
             "",
             "## Headline figures", "", *headline_rows(results), "",
             "## Sections", "",
             "| section | status | seconds |", "|---|---|---|"]
    for name, st in sections.items():
        secs = f"{st['seconds']:.0f}" if "seconds" in st else ""
        lines.append(f"| {name} | {st.get('status')}"
                     f"{'' if st.get('status') == 'measured' else ': ' + st.get('reason', '')}"
                     f" | {secs} |")
    if pngs:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in pngs]
    lines += ["", "## Tables", "", "```", table.rstrip(), "```", ""]
    path = out_dir / ("RESULTS.md" if stem == "results" else f"{stem}.md")
    path.write_text("\n".join(lines))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mixgcn-bench-report", description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="a results.json written by the bench")
    args = p.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"mixgcn-bench-report: cannot read {args.results}: {e}") from None
    txt = args.results.with_suffix(".txt")
    table = txt.read_text() if txt.exists() else ""
    print(write_report(results, table, args.results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
