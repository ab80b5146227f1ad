"""The ``mixgcn`` command line: a thin layer over :mod:`mixgcn.host`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from mixgcn import __version__
from mixgcn.gen.board import BOARDS as BOARD_NAMES
from mixgcn.gen.config import (
    CHIP_PRESETS,
    FABRIC_PRESETS,
    MEMORY_PROFILES,
    ConfigError,
    MemoryProfile,
    load_chip,
    load_memory,
    memory_names,
)
from mixgcn.gen.dram import DRAMPart
from mixgcn.gen.resources import ECP5_PARTS
from mixgcn.golden.datasets import DatasetError, default_data_dir, load_dataset
from mixgcn.golden.gcn import GCNConfig
from mixgcn.golden.reorder import ORDERINGS
from mixgcn.host.backends import BACKENDS, DEFAULT_BAUD, open_chips, open_system, opened
from mixgcn.host.comm import MPIHost, mpi_world_size, serve
from mixgcn.host.device import DeviceError
from mixgcn.host.explore import DSP_FILL, check_dsp_fill, explore, multiplier_budget
from mixgcn.host.projection import PROJECTED_GRAPHS
from mixgcn.host.sharded import CLOCK_MHZ, LINK_GBPS
from mixgcn.host.sharding import PARALLELISMS, PARTITIONERS
from mixgcn.host.train import EXCHANGES, PRECISIONS, Parallel, train

DESCRIPTION = """\
Train graph convolutional networks on the mixgcn accelerator: on its functional
model (golden) or on the chip's generated Verilog simulated by Verilator (rtl)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mixgcn", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"mixgcn {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a GCN and report accuracy (and cycles)",
                       description="Train a GCN; progress on stderr, a summary on stdout.")
    t.add_argument("--dataset", default="synthetic",
                   help="cora | citeseer | pubmed | synthetic[:nodes=N,degree=D,features=F,"
                        "classes=C,homophily=H,seed=S] | PATH.npz (default: synthetic)")
    t.add_argument("--data-dir", type=Path, default=None,
                   help=f"Planetoid folder (default: $MIXGCN_DATA, else {default_data_dir()})")
    t.add_argument("--backend", default="golden", choices=sorted(BACKENDS),
                   help="golden: the numpy functional model; rtl: every SpMM and GEMM on "
                        "the simulated chip (Verilator; fixed16 only); board: on a board "
                        "over its serial link (--board, --port; docs/link.md)")
    t.add_argument("--precision", default=None, choices=PRECISIONS,
                   help="default: float32 on golden, fixed16 on rtl")
    t.add_argument("--chip", default=None, metavar="{" + ",".join(CHIP_PRESETS) + ",FILE.json}",
                   help="rtl: the chip to simulate, a preset or the chip.json 'make verilog' "
                        "writes (default: default)")
    t.add_argument("--memory", default=None, choices=memory_names(),
                   help="rtl, board --port sim: the memory the simulated chip reads and "
                        "writes: a profile of "
                        "bandwidth, latency and bursts the memory model plays, or "
                        "ulx3s-litedram, the ULX3S's SDRAM behind LiteDRAM's controller "
                        "(the dram extra) (docs/memory.md; default: ideal, every channel a "
                        "word a cycle)")
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
                        "SpMM can trail its input rows closely; metis = part by part of a "
                        "METIS partition, so column windows load fewer rows (needs "
                        "pymetis; default: none)")
    t.add_argument("--chips", type=int, default=1,
                   help="chips to share the kernels among (default 1); under mpiexec, one "
                        "per rank: -n must equal --chips")
    t.add_argument("--parallelism", default=None, choices=PARALLELISMS,
                   help="with several chips: mop = Mixture of Parallelism (feature-parallel "
                        "aggregation, node-parallel combination; default), partition = row "
                        "partitions with halo exchange (the baseline)")
    t.add_argument("--partitioner", default=None, choices=PARTITIONERS,
                   help="how nodes are split among chips: contiguous ranges (default) or "
                        "METIS's minimum edge cut (pymetis)")
    t.add_argument("--link-gbps", type=float, default=None,
                   help=f"bandwidth of each chip's link, for the exchanges' cycles "
                        f"(default {LINK_GBPS:g} Gbit/s at a {CLOCK_MHZ:g} MHz chip clock)")
    t.add_argument("--exchange", default=None, choices=EXCHANGES,
                   help="with several rtl chips under mop: host = the host carries the "
                        "all-to-all (default); fabric = the chips' exchange fabric does, "
                        "in the simulation (rows interleaved: node r on chip r mod P)")
    t.add_argument("--fabric", default=None, choices=tuple(FABRIC_PRESETS),
                   help="with --exchange fabric: crossbar = chips on one die (default), "
                        "serial = narrow links between boards (docs/fabric.md)")
    t.add_argument("--board", default=None, choices=tuple(BOARD_NAMES),
                   help="board: the board (its chip clock sets the line's divisor; default "
                        "ulx3s-85f)")
    t.add_argument("--port", default=None,
                   help="board: the serial device (e.g. /dev/ttyUSB0), or 'sim' for the "
                        "simulated board top (the chip, its host link and memory in "
                        "Verilator; default sim)")
    t.add_argument("--baud", type=int, default=None,
                   help=f"board: the serial line's rate (default {DEFAULT_BAUD:,})")
    t.add_argument("--no-pipeline", action="store_true",
                   help="rtl: run every kernel alone instead of pipelining an SpMM with "
                        "the GEMM it feeds or is fed by (to measure the pipeline's gain)")
    t.add_argument("--json", type=Path, default=None, help="write the metrics to this file")
    v = sub.add_parser("verilog", help="write a chip's or a multi-chip system's Verilog",
                       description="Write the Verilog of one chip, or of P chips joined by "
                                   "an exchange fabric (docs/fabric.md), and the JSON of its "
                                   "parameters.")
    v.add_argument("--chip", default="default",
                   metavar="{" + ",".join(CHIP_PRESETS) + ",FILE.json}",
                   help="the chip: a preset or a chip.json (default: default)")
    v.add_argument("--chips", type=int, default=1, help="chips in the system (default 1)")
    v.add_argument("--fabric", default="crossbar", choices=tuple(FABRIC_PRESETS),
                   help="with --chips P > 1: the exchange fabric (default crossbar)")
    v.add_argument("--out", type=Path, default=Path("build/verilog"),
                   help="folder for <name>.v and <name>.json (default build/verilog)")
    v.add_argument("--lint", action="store_true",
                   help="check it with verilator --lint-only -Wall (the documented waivers)")
    b = sub.add_parser("board", help="build a bitstream for an FPGA board (YoWASP tools)",
                       description="Elaborate chips for an FPGA board, then synthesise, place, "
                                   "route and pack them with YoWASP's yosys and nextpnr (the "
                                   "fpga extra); report resources and Fmax from the tools' "
                                   "own reports (docs/boards.md).")
    b.add_argument("--board", required=True, metavar="{" + ",".join(BOARD_NAMES) + "}",
                   help="the board")
    b.add_argument("--chip", default="ecp5", metavar="{" + ",".join(CHIP_PRESETS) + ",FILE.json}",
                   help="the chip: a preset or a chip.json (default: ecp5)")
    b.add_argument("--chips", type=int, default=1,
                   help="chips of the system (default 1)")
    b.add_argument("--fabric", default="crossbar", choices=("crossbar", "serial"),
                   help="with --chips P > 1: crossbar = every chip on one FPGA (one "
                        "bitstream); serial = a chip per board, joined by links on pins "
                        "(a bitstream per board)")
    b.add_argument("--mhz", type=float, default=None,
                   help="ECP5 boards: the chip's clock from the PLL (default 100)")
    b.add_argument("--seed", type=int, default=None,
                   help="nextpnr's placement seed (default: nextpnr's own); Fmax moves "
                        "by several MHz from one placement to another")
    b.add_argument("--pnr-minutes", type=float, default=None,
                   help="stop place and route after this many minutes, saying how far it "
                        "got (default: no limit; a congested design can route for hours)")
    b.add_argument("--top", default="scan", choices=("scan", "link"),
                   help="scan = the design's ports on a scan chain (any design, to build "
                        "and time it); link = one chip as the board uses it: its host "
                        "link on the board's serial port, its memory on the board's DRAM "
                        "(ulx3s-85f; docs/link.md)")
    b.add_argument("--baud", type=int, default=None,
                   help=f"with --top link: the serial line's rate (default {DEFAULT_BAUD:,})")
    b.add_argument("--out", type=Path, default=None,
                   help="build folder (default build/board/<board>-<P>x<chip>[-link])")
    b.add_argument("--json", type=Path, default=None, help="also write the report here")
    b.add_argument("--verbose", action="store_true", help="show the tools' own output")
    t.add_argument("--quiet", action="store_true", help="no per-epoch progress")
    t.add_argument("--verbose", action="store_true",
                   help="rtl: show the simulator's and the build's own output")
    e = sub.add_parser("explore", help="find the chip that trains a dataset fastest on a part",
                       description="Screen a grid of chip configurations on an FPGA's "
                                   "multipliers and block RAM, train the dataset for two "
                                   "epochs on the performance model (docs/model.md) on each "
                                   "that fits, and write the fastest as a chip.json.")
    e.add_argument("--dataset", default="cora",
                   help="a Planetoid name, synthetic[:key=value,...] or an .npz (default cora)")
    e.add_argument("--data-dir", type=Path, default=None,
                   help="folder of the Planetoid files (default: $MIXGCN_DATA)")
    e.add_argument("--budget", required=True, metavar="{" + ",".join(ECP5_PARTS) + "}",
                   help="the part whose resources bound the chip")
    e.add_argument("--memory", default="ideal", metavar="{" + ",".join(memory_names()) + "}",
                   help="the memory profile the model plays (default ideal)")
    e.add_argument("--dsp-fill", type=float, default=DSP_FILL, metavar="SHARE",
                   help="the largest share of the part's multipliers a chip may take, "
                        f"leaving room to route (default {DSP_FILL})")
    e.add_argument("--out", type=Path, default=None,
                   help="the chosen chip's JSON (default build/explore/<dataset>-<budget>.json)")
    e.add_argument("--json", type=Path, default=None,
                   help="also write every candidate's figures here")
    e.add_argument("--top", type=int, default=10, help="candidates shown (default 10)")
    e.add_argument("--quiet", action="store_true", help="no progress lines")
    j = sub.add_parser("project", help="project a training epoch of a large graph (model output)",
                       description="Project, from the performance model and a graph's "
                                   "statistics, a training epoch on P chips: cycles, seconds "
                                   "at a clock, bytes between chips, memory per chip and chips "
                                   "needed by a board's memory. Model output, not a "
                                   "measurement (docs/projection.md).")
    j.add_argument("--graph", default="reddit",
                   help="one of " + ", ".join(PROJECTED_GRAPHS) + " (published sizes), or a "
                        "dataset this machine holds: a Planetoid name, synthetic[:...] or an "
                        ".npz (default reddit)")
    j.add_argument("--data-dir", type=Path, default=None,
                   help="folder of the Planetoid files (default: $MIXGCN_DATA)")
    j.add_argument("--chip", default="ecp5",
                   help="a chip preset or a chip.json (default ecp5)")
    j.add_argument("--chips", default="1,2,4,8,16,32",
                   help="comma-separated chip counts P (default 1,2,4,8,16,32)")
    j.add_argument("--parallelism", default="mop,partition",
                   help="comma-separated: mop, partition (default both)")
    j.add_argument("--fmax", type=float, required=True, metavar="MHZ",
                   help="the chips' clock: the Fmax a board build reported (mixgcn board)")
    j.add_argument("--link-gbps", type=float, default=10.0,
                   help="each chip's link, Gbit/s (default 10)")
    j.add_argument("--hidden", type=int, default=16, help="hidden width (default 16)")
    j.add_argument("--layers", type=int, default=2, help="layers (default 2)")
    j.add_argument("--memory", default="ideal", metavar="{" + ",".join(memory_names()) + "}",
                   help="the memory profile the model plays (default ideal)")
    j.add_argument("--json", type=Path, default=None, help="also write the figures here")
    j.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def progress_printer(epochs: int):
    """A progress callback printing about ten lines per run (every epoch on short runs),
    with the device's cycles so far when it counts them."""
    every = max(1, epochs // 10) if epochs > 20 else 1

    def report(s: dict) -> None:
        if s["epoch"] % every == 0 or s["epoch"] == s["epochs"]:
            cycles = f"  {s['cycles']:,} cycles" if s.get("cycles") is not None else ""
            print(f"  epoch {s['epoch']:>5}/{s['epochs']}  loss {s['loss']:.4f}  "
                  f"train acc {s['train_accuracy']:.3f}  ({s['seconds'] * 1e3:.1f} ms)"
                  f"{cycles}", file=sys.stderr, flush=True)
    return report


def _check_writable(path: Path) -> None:
    """Refuse, before any work, a report file that could not be written."""
    if path.is_dir():
        raise SystemExit(f"mixgcn: --json {path} is a directory")
    parent = path.parent
    while not parent.exists():  # the folders that do not exist yet are made at the end
        parent = parent.parent
    if not parent.is_dir():
        raise SystemExit(f"mixgcn: --json {path} cannot be written ({parent} is not a folder)")
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise SystemExit(f"mixgcn: --json {path} cannot be written "
                         f"({target} is not writable)")


def _fail(message: str) -> SystemExit:
    return SystemExit(f"mixgcn: {message}")


def cmd_train(args) -> int:
    try:
        config = GCNConfig(layers=args.layers, hidden=args.hidden, dropout=args.dropout,
                           lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
                           seed=args.seed)
    except ValueError as e:
        raise _fail(f"bad hyperparameter: {e}") from None
    if args.json is not None:
        _check_writable(args.json)
    rtl = args.backend in ("rtl", "board")  # a chip: simulated, or on a board
    for flag, given in (("--no-pipeline", args.no_pipeline), ("--chip", args.chip),
                        ("--memory", args.memory)):
        if given and not rtl:
            raise _fail(f"{flag} applies to --backend rtl or board only")
    for flag, given in (("--board", args.board), ("--port", args.port),
                        ("--baud", args.baud)):
        if given is not None and args.backend != "board":
            raise _fail(f"{flag} applies to --backend board only")
    if args.backend == "board":
        from mixgcn.hdl.uart import divisor_for

        board = BOARD_NAMES[args.board or "ulx3s-85f"]
        try:  # a line the board's clock cannot make, refused before anything is built
            divisor_for(board.chip_hz, args.baud or DEFAULT_BAUD)
        except ValueError as e:
            raise _fail(f"--baud {args.baud}: {e}") from None
    parallel, world = _parallel(args)
    precision = args.precision or ("fixed16" if rtl else "float32")
    if rtl and precision != "fixed16":
        raise _fail(f"the {args.backend} backend computes in fixed point: --precision "
                    f"{precision} is "
                    "not available (use fixed16)")
    try:
        chip_name, chip = load_chip(args.chip or "default")
        memory = load_memory(args.memory or "ideal")
        dataset = load_dataset(args.dataset, args.data_dir, seed=args.seed)
    except (ConfigError, DatasetError) as e:
        raise _fail(str(e)) from None
    if isinstance(memory, DRAMPart) and args.exchange == "fabric":
        raise _fail(f"--memory {memory.name}: a DRAM behind its controller is simulated "
                    "for one chip (--backend rtl, or board with --port sim), not yet on a "
                    "fabric")
    if parallel is not None:
        try:
            parallel.check(dataset)
        except ValueError as e:
            raise _fail(str(e)) from None
    rank = world.Get_rank() if world is not None else 0
    log = (lambda msg: None) if args.quiet or rank else (
        lambda msg: print(f"mixgcn: {msg}", file=sys.stderr, flush=True))
    log(dataset.summary())
    options = {}
    if rtl:
        from mixgcn.host.chip_driver import plan_training

        try:  # every limit of the chip, before anything is built
            plan_training(dataset, config, chip, args.reorder)
        except ValueError as e:
            raise _fail(f"the chip '{chip_name}' cannot train {dataset.name}: {e}") from None
        options = dict(chip=chip, chip_name=chip_name, pipeline=not args.no_pipeline,
                       verbose=args.verbose, memory=memory,
                       on_build=lambda: log(f"generating and building the simulated chip "
                                            f"'{chip_name}' (a minute or two, once: later "
                                            "runs reuse it)"))
        if args.backend == "board":
            options.update(board=args.board or "ulx3s-85f", port=args.port or "sim",
                           baud=args.baud or DEFAULT_BAUD)
    log(f"training {config.layers}-layer GCN, hidden {config.hidden}, {precision} on "
        f"{args.backend}{f' (chip {chip_name}, {memory.name} memory)' if rtl else ''}, "
        f"{config.epochs} epochs, "
        f"seed {config.seed}"
        + (f", nodes reordered ({args.reorder})" if args.reorder != "none" else ""))
    if parallel is not None:
        log(f"sharing every kernel among {parallel.chips} chips: "
            + ("Mixture of Parallelism (aggregation by feature columns, combination by "
               "node rows)" if parallel.parallelism == "mop" else
               "partition parallelism (node rows, halo exchange)")
            + f", nodes split {parallel.partitioner}"
            + (f"; the all-to-all on a {parallel.fabric} exchange fabric, other exchanges"
               if parallel.exchange == "fabric" else "; exchanges")
            + " timed at "
              f"{parallel.link_gbps:g} Gbit/s per chip at {CLOCK_MHZ:g} MHz"
            + (f"; one chip per MPI rank ({parallel.chips} ranks)" if world else ""))
    t0 = time.perf_counter()
    try:
        with _chips(args.backend, options, parallel, world) as backend:
            if backend is None:  # an MPI rank that serves its chip to rank 0
                return 0
            if rtl:
                log(f"simulated chip{'s' if parallel and parallel.chips > 1 else ''} ready "
                    f"({time.perf_counter() - t0:.1f} s)")
            result = train(dataset, config, precision=precision, backend=backend,
                           progress=None if args.quiet else progress_printer(config.epochs),
                           reorder=args.reorder, parallel=parallel)
    except (ValueError, DeviceError, RuntimeError) as e:
        raise _fail(str(e)) from None
    except KeyboardInterrupt:
        raise _fail("interrupted; the simulated chip was stopped") from None
    if rtl:
        result["chip"], result["memory_profile"] = chip_name, memory.name
    print(f"accuracy: train {result['train_accuracy']:.4f}  val {result['val_accuracy']:.4f}  "
          f"test {result['test_accuracy']:.4f}")
    print(f"wall time: {result['wall_seconds']:.2f} s "
          f"({result['epoch_seconds_median'] * 1e3:.1f} ms/epoch)")
    if "cycles" in result:
        per_op = ", ".join(f"{k} {v:,}" for k, v in sorted(result["cycles_per_op"].items()))
        print(f"simulated cycles: {result['cycles']:,} (SAE busy {result['sae_busy_cycles']:,}, "
              f"DCE busy {result['dce_busy_cycles']:,}; {per_op})")
    if "bytes_moved" in result:
        ops = ", ".join(f"{k} {v:,}" for k, v in result["bytes_per_op"].items())
        print(f"between chips: {result['bytes_moved']:,} bytes ({ops or 'nothing'}); "
              f"most into one chip {max(result['bytes_per_chip']):,}")
    print(f"weights sha256: {result['weights_sha256']}")
    if args.json:
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        except OSError as e:
            raise _fail(f"could not write {args.json}: {e.strerror or e}") from None
        print(f"metrics written to {args.json}")
    return 0


def _parallel(args):
    """The run's sharing among chips (None: one chip, as always), and the MPI world
    when started by mpiexec with several ranks."""
    given = (args.parallelism, args.partitioner, args.link_gbps, args.exchange, args.fabric)
    ranks = mpi_world_size()
    world = None
    if ranks is not None and ranks > 1:
        if args.chips != ranks:
            raise _fail(f"mpiexec started {ranks} ranks but --chips is {args.chips}: "
                        "run one rank per chip (mpiexec -n P mixgcn train --chips P)")
        try:
            from mpi4py import MPI
        except ImportError:
            raise _fail("running under mpiexec needs mpi4py (pip install "
                        "'mixgcn[parallel]')") from None
        world = MPI.COMM_WORLD
        if world.Get_size() != ranks:
            raise _fail(f"mpi4py sees {world.Get_size()} ranks, mpiexec started {ranks}: "
                        "is mpi4py built for the MPI that started this run?")
    if args.chips == 1 and world is None and all(v is None for v in given):
        return None, None
    if args.precision not in (None, "fixed16") or (args.precision is None
                                                    and args.backend == "golden"):
        raise _fail(f"--chips {args.chips}: chips compute in fixed point; add "
                    "--precision fixed16")
    try:
        if args.fabric is not None and args.exchange != "fabric":
            raise ValueError(f"--fabric {args.fabric} applies with --exchange fabric only")
        if args.exchange == "fabric":
            if args.backend != "rtl":
                raise ValueError("--exchange fabric runs the chips' fabric in simulation: "
                                 "use --backend rtl")
            if world is not None:
                raise ValueError("--exchange fabric simulates every chip in one process; "
                                 "it does not run under mpiexec")
        parallel = Parallel(args.chips, args.parallelism or "mop",
                            args.partitioner or "contiguous",
                            LINK_GBPS if args.link_gbps is None else args.link_gbps,
                            args.exchange or "host", args.fabric or "crossbar")
    except ValueError as e:
        raise _fail(f"--chips {args.chips}: {e}") from None
    if not (parallel.link_gbps > 0 and parallel.link_gbps < float("inf")):
        raise _fail(f"--link-gbps must be a finite number > 0, got {args.link_gbps}")
    return parallel, world


@contextmanager
def _chips(name: str, options: dict, parallel, world):
    """What train() runs on: one backend; P in this process; or, under MPI, chip 0
    here and one per other rank (``None`` on those ranks, after serving)."""
    if parallel is None:
        with opened(name, **options) as backend:
            yield backend
        return
    if parallel.exchange == "fabric":
        comm = open_system(parallel.chips, parallel.fabric, **options)
    elif world is None:
        comm = open_chips(name, parallel.chips, **options)
    else:
        rank = world.Get_rank()
        if rank:
            options.pop("on_build", None)
        local = BACKENDS[name](**options, index=rank)
        if rank:
            serve(world, local)
            yield None
            return
        comm = MPIHost(world, local)
    try:
        yield comm
    finally:
        comm.close()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "train":
        return cmd_train(args)
    if args.command == "verilog":
        return cmd_verilog(args)
    if args.command == "board":
        return cmd_board(args)
    if args.command == "explore":
        return cmd_explore(args)
    if args.command == "project":
        return cmd_project(args)
    raise AssertionError(args.command)


def _int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise _fail(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values:
        raise _fail(f"{what} is empty")
    return values


def cmd_project(args) -> int:
    """A training epoch of a large graph on P chips, projected by the model."""
    from mixgcn.host.projection import GraphStats, project, table

    chips = _int_list(args.chips, "--chips")
    bad = [p for p in chips if not 1 <= p <= 4096]
    if bad:
        raise _fail(f"--chips: {bad[0]} is not in 1..4096")
    parallelisms = [p.strip() for p in args.parallelism.split(",") if p.strip()]
    for p in parallelisms or [""]:
        if p not in ("mop", "partition"):
            raise _fail(f"--parallelism: {p!r} is not one of mop, partition")
    if not args.fmax > 0:
        raise _fail(f"--fmax must be a positive clock in MHz, got {args.fmax}")
    if not args.link_gbps > 0:
        raise _fail(f"--link-gbps must be positive, got {args.link_gbps}")
    if args.hidden < 1 or args.layers < 1:
        raise _fail(f"--hidden and --layers must be at least 1, got {args.hidden} and "
                    f"{args.layers}")
    try:
        _, chip = load_chip(args.chip)
    except ConfigError as e:
        raise _fail(str(e)) from None
    memory = _model_memory(args.memory)
    if args.json:
        _check_writable(args.json)
    if args.graph in PROJECTED_GRAPHS:
        graph = PROJECTED_GRAPHS[args.graph]
    else:
        try:
            dataset = load_dataset(args.graph, args.data_dir or default_data_dir())
        except DatasetError as e:
            raise _fail(f"--graph {args.graph!r}: not one of {', '.join(PROJECTED_GRAPHS)} "
                        f"and not a dataset: {e}") from None
        graph = GraphStats.of(dataset)
    say = None if args.quiet else (lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    result = project(graph, chip, chips=tuple(chips), fmax_mhz=args.fmax,
                     link_gbps=args.link_gbps, hidden=args.hidden, layers=args.layers,
                     memory=memory, parallelisms=tuple(parallelisms), progress=say)
    print("\n".join(table(result)))
    print(f"  source: {graph.source}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _model_memory(name: str) -> MemoryProfile:
    """The memory profile ``--memory`` names, for the performance model (which plays
    the profiles, not a DRAM controller)."""
    try:
        memory = load_memory(name)
    except ConfigError as e:
        raise _fail(str(e)) from None
    if not isinstance(memory, MemoryProfile):
        raise _fail(f"--memory {name}: the model plays the memory profiles "
                    f"({', '.join(MEMORY_PROFILES)}), not a DRAM controller")
    return memory


def cmd_explore(args) -> int:
    """The fastest configuration of the grid on the part, by the performance model."""
    if args.budget not in ECP5_PARTS:
        raise _fail(f"unknown --budget {args.budget!r}: expected one of {sorted(ECP5_PARTS)}")
    if args.top < 1:
        raise _fail(f"--top must be at least 1, got {args.top}")
    try:
        check_dsp_fill(args.dsp_fill)
    except ValueError:
        raise _fail(f"--dsp-fill must be in (0, 1], got {args.dsp_fill}") from None
    memory = _model_memory(args.memory)
    out = args.out or Path("build/explore") / (
        f"{Path(args.dataset).stem.split(':')[0]}-{args.budget}.json")
    for path in (out, args.json):
        if path is not None:
            _check_writable(path)
    try:
        dataset = load_dataset(args.dataset, args.data_dir or default_data_dir())
    except DatasetError as e:
        raise _fail(str(e)) from None
    part = ECP5_PARTS[args.budget]
    say = None if args.quiet else (lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    ranked = explore(dataset, part, memory, dsp_fill=args.dsp_fill, progress=say)
    best = ranked[0]
    if best.refused is not None:
        raise _fail(f"no configuration that fits {args.budget} holds {args.dataset}: "
                    f"{best.refused}")
    print(f"{args.dataset} on {args.budget} ({part.dsp} multipliers, at most "
          f"{multiplier_budget(part, args.dsp_fill)} used; {part.bram} block RAMs), "
          f"{memory.name} memory: the model's second epoch")
    print(f"  {'configuration':<44} {'mults':>5} {'BRAM':>5} {'cycles/epoch':>12} "
          f"{'utilisation':>11}")
    for c in [c for c in ranked if c.refused is None][:args.top]:
        print(f"  {c.label():<44} {c.multipliers:>5} {c.bram:>5} {c.epoch_cycles:>12,} "
              f"{c.utilisation:>11.1%}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(best.config.to_dict(), indent=2) + "\n")
    print(f"chosen: {best.label()}; written to {out} (mixgcn train/board --chip {out}); "
          f"{len(ranked)} candidates in {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(
            dataset=args.dataset, budget=args.budget, memory=memory.name,
            dsp_fill=args.dsp_fill, chosen=best.to_dict(),
            candidates=[c.to_dict() for c in ranked]), indent=2) + "\n")
    return 0


def cmd_verilog(args) -> int:
    """One chip's Verilog (``chip.v``, top ``chip``) or a system's (``system-P-<fabric>.v``,
    top ``system``), each with the JSON of its configuration beside it."""
    from mixgcn.gen.config import SystemConfig
    from mixgcn.gen.verilog import LINT_WAIVERS, chip_verilog, lint, system_verilog

    try:
        chip_name, chip = load_chip(args.chip)
        if args.chips == 1 and args.fabric != "crossbar":
            raise ConfigError(f"--fabric {args.fabric} needs --chips 2 or more")
        system = (SystemConfig(chip=chip, chips=args.chips, fabric=FABRIC_PRESETS[args.fabric])
                  if args.chips != 1 else None)
    except ConfigError as e:
        raise _fail(str(e)) from None
    stem = Path(chip_name).stem
    name, top = ((f"{stem}-system-{args.chips}-{args.fabric}", "system") if system
                 else (f"{stem}-chip", "chip"))
    config = system or chip
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"{name}.v"
        path.write_text(system_verilog(system) if system else chip_verilog(chip))
        path.with_suffix(".json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    except OSError as e:
        raise _fail(f"could not write to {args.out}: {e.strerror or e}") from None
    print(f"{path} (top module {top}) and {path.with_suffix('.json')}")
    if args.lint:
        r = lint(path, top, LINT_WAIVERS)
        if r.returncode:
            print(r.stderr, file=sys.stderr)
            raise _fail(f"{path}: verilator --lint-only -Wall found problems (above)")
        print(f"verilator --lint-only -Wall: clean (waived: {', '.join(LINT_WAIVERS)})")
    return 0


def cmd_board(args) -> int:
    """One bitstream and its report (docs/boards.md)."""
    from mixgcn.gen.board import BoardError, build_board

    if args.json is not None:
        _check_writable(args.json)
    try:
        chip_name, chip = load_chip(args.chip)
    except ConfigError as e:
        raise _fail(str(e)) from None
    stem = Path(chip_name).stem
    if args.baud is not None and args.top != "link":
        raise _fail("--baud applies to --top link only")
    kind = ("-serial" if args.fabric == "serial" else "") + \
        ("-link" if args.top == "link" else "")
    out = args.out or Path("build/board") / f"{args.board}-{args.chips}x{stem}{kind}"

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        report = build_board(args.board, chip, chip_name=stem, chips=args.chips,
                             fabric=args.fabric, out=out, mhz=args.mhz, seed=args.seed,
                             top=args.top, baud=args.baud or DEFAULT_BAUD,
                             pnr_minutes=args.pnr_minutes, progress=progress,
                             verbose=args.verbose)
    except BoardError as e:
        raise _fail(f"{args.board}: {e}") from None
    for r in report.get("boards", [report]):
        met = "met" if r["timing_met"] else "NOT met"
        where = f"board {r['position']}: chip {r['position']} of " if "position" in r else ""
        print(f"{report['board']} ({report['device']}): {where}{report['chips']} x "
              f"{report['chip']}: {r['lut4']:,} LUT4, {r['ff']:,} FF, {r['dsp']} DSP, "
              f"{r['bram']} BRAM; Fmax {r['fmax_mhz']} MHz, target {r['target_mhz']} MHz: "
              f"timing {met}")
        if r.get("slowest_path"):
            sp = r["slowest_path"]
            print(f"slowest path: {sp['from']} -> {sp['to']}, {sp['ns']:.2f} ns "
                  f"({sp['routing_ns']:.2f} of it routing)")
        print(f"bitstream {r['bitstream']}")
    print(f"report {out / 'report.json'}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
