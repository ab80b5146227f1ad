"""``make bench``: measure, never assert. Writes one JSON object plus a readable table.

Each section returns ``(keys, table_rows)``; keys are merged into the results object
(later sections add keys, none is ever renamed). Run ``python -m mixgcn.host.bench
--only golden`` to run one section.
"""

from __future__ import annotations

import argparse
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


SECTIONS = {"golden": bench_golden}


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
