"""The ``mixgcn`` command line: a thin layer over :mod:`mixgcn.host`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from mixgcn.golden.datasets import DatasetError, default_data_dir, load_dataset
from mixgcn.golden.gcn import GCNConfig
from mixgcn.golden.reorder import ORDERINGS
from mixgcn.host.backends import BACKENDS
from mixgcn.host.train import PRECISIONS, train


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mixgcn", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a GCN and report accuracy (and cycles)")
    t.add_argument("--dataset", default="synthetic",
                   help="cora | citeseer | pubmed | synthetic[:nodes=N,degree=D,features=F,"
                        "classes=C,homophily=H,seed=S] | PATH.npz (default: synthetic)")
    t.add_argument("--data-dir", default=None,
                   help="Planetoid folder (default: $MIXGCN_DATA, then ./data/planetoid)")
    t.add_argument("--backend", default="golden", choices=[*sorted(BACKENDS), "rtl"],
                   help="golden: the numpy model; rtl: every SpMM/GEMM on the simulated "
                        "engines (Verilator; fixed16 only)")
    t.add_argument("--precision", default=None, choices=PRECISIONS,
                   help="default: float32 on golden, fixed16 on rtl")
    d = GCNConfig()
    t.add_argument("--layers", type=int, default=d.layers)
    t.add_argument("--hidden", type=int, default=d.hidden)
    t.add_argument("--epochs", type=int, default=d.epochs)
    t.add_argument("--lr", type=float, default=d.lr)
    t.add_argument("--weight-decay", type=float, default=d.weight_decay,
                   help="L2 weight decay on the first layer (default %(default)s)")
    t.add_argument("--dropout", type=float, default=d.dropout)
    t.add_argument("--seed", type=int, default=d.seed)
    t.add_argument("--reorder", default="none", choices=ORDERINGS,
                   help="renumber the nodes first: rcm = reverse Cuthill-McKee, so an "
                        "SpMM can trail its input rows closely (default: none)")
    t.add_argument("--chips", type=int, default=1,
                   help="rtl: simulated chips (only 1 so far: multi-chip Mixture of "
                        "Parallelism is not built yet)")
    t.add_argument("--no-pipeline", action="store_true",
                   help="rtl: run every kernel alone instead of pipelining an SpMM with "
                        "the GEMM it feeds or is fed by (to measure the pipeline's gain)")
    t.add_argument("--json", type=Path, default=None, help="write the metrics to this file")
    t.add_argument("--quiet", action="store_true", help="no per-epoch progress")
    return p


def progress_printer(epochs: int, backend=None):
    """A progress callback printing about ten lines per run (every epoch on short runs),
    with the simulated cycles so far when ``backend`` counts them."""
    every = max(1, epochs // 10) if epochs > 20 else 1

    def report(s: dict) -> None:
        if s["epoch"] % every == 0 or s["epoch"] == s["epochs"]:
            cycles = ""
            if backend is not None and hasattr(backend, "summary"):
                cycles = f"  {backend.summary()['cycles']:,} cycles"
            print(f"  epoch {s['epoch']:>5}/{s['epochs']}  loss {s['loss']:.4f}  "
                  f"train acc {s['train_accuracy']:.3f}  ({s['seconds'] * 1e3:.1f} ms){cycles}",
                  file=sys.stderr, flush=True)
    return report


def rtl_arguments(args, config: GCNConfig) -> dict:
    """What the simulator process needs to train: paths made absolute, since it runs in
    its build folder."""
    dataset = args.dataset
    if dataset.endswith(".npz"):
        dataset = str(Path(dataset).resolve())
    data_dir = str(Path(args.data_dir if args.data_dir else default_data_dir()).resolve())
    return dict(dataset=dataset, data_dir=data_dir, config=dataclasses.asdict(config),
                quiet=args.quiet, reorder=args.reorder, pipeline=not args.no_pipeline)


def cmd_train(args) -> int:
    try:
        config = GCNConfig(layers=args.layers, hidden=args.hidden, dropout=args.dropout,
                           lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
                           seed=args.seed)
    except ValueError as e:
        raise SystemExit(f"mixgcn: bad hyperparameter: {e}") from None
    try:
        dataset = load_dataset(args.dataset, args.data_dir, seed=args.seed)
    except DatasetError as e:
        raise SystemExit(f"mixgcn: {e}") from None
    if args.chips != 1:
        raise SystemExit(f"mixgcn: --chips {args.chips}: only one chip is supported so far "
                         "(multi-chip Mixture of Parallelism is not implemented yet)")
    if args.no_pipeline and args.backend != "rtl":
        raise SystemExit("mixgcn: --no-pipeline applies to --backend rtl only")
    precision = args.precision or ("fixed16" if args.backend == "rtl" else "float32")
    if args.backend == "rtl" and precision != "fixed16":
        raise SystemExit(f"mixgcn: the rtl backend computes in fixed point: "
                         f"--precision {precision} is not available (use fixed16)")
    print(f"mixgcn: {dataset.summary()}", file=sys.stderr)
    print(f"mixgcn: training {config.layers}-layer GCN, hidden {config.hidden}, "
          f"{precision} on {args.backend}, {config.epochs} epochs, seed {config.seed}"
          + (f", nodes reordered ({args.reorder})" if args.reorder != "none" else ""),
          file=sys.stderr)
    if args.backend == "rtl":
        from mixgcn.sim.rtl_backend import check_fits, train_rtl

        try:
            check_fits(dataset)
            result = train_rtl(rtl_arguments(args, config))
        except ValueError as e:
            raise SystemExit(f"mixgcn: {e}") from None
    else:
        result = train(dataset, config, precision=precision, backend=args.backend,
                       progress=None if args.quiet else progress_printer(config.epochs),
                       reorder=args.reorder)
    print(f"accuracy: train {result['train_accuracy']:.4f}  val {result['val_accuracy']:.4f}  "
          f"test {result['test_accuracy']:.4f}")
    print(f"wall time: {result['wall_seconds']:.2f} s "
          f"({result['epoch_seconds_median'] * 1e3:.1f} ms/epoch)")
    if "cycles" in result:
        per_op = ", ".join(f"{k} {v:,}" for k, v in sorted(result["cycles_per_op"].items()))
        print(f"simulated cycles: {result['cycles']:,} (SAE busy {result['sae_busy_cycles']:,}, "
              f"DCE busy {result['dce_busy_cycles']:,}; {per_op})")
    print(f"weights sha256: {result['weights_sha256']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"metrics written to {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "train":
        return cmd_train(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    raise SystemExit(main())
