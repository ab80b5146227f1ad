"""The RTL backend: every SpMM and GEMM of training executed by the simulated chip.

The chip's generated Verilog (:class:`~mixgcn.hdl.chip.Chip`, preset ``default``) runs
under Verilator on the memory model (:mod:`mixgcn.sim.chip_harness`). The training
loop runs inside the simulator process in a thread (``cocotb.task.bridge``); each kernel
call lays its operands out in the chip's memory in bulk, runs its descriptors and waits
for the last status record (``cocotb.task.resume``), so no Python acts per cycle while
a kernel runs (:class:`~mixgcn.sim.chip_driver.ChipKernels`). Sparse operands go to the
SAE (``Â·H``; ``X·W`` and ``Xᵀ·G`` when the features are sparse), dense ones to the
DCE; an SpMM and the GEMM its rows feed (or that feeds it) run as one pipelined batch
(the fine-grain pipeline), and an SpMM and an unrelated GEMM as one batch on both
engines at once. ``pipeline=False`` runs every kernel alone, to measure the gain.

Cycle counts are the chip's: each batch's cycles from its start to its last status
record, per operation kind, and the engines' busy counters.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.host.backends import NumberFormat

__all__ = ["CHIP", "RTLBackend", "check_fits", "train_rtl"]

# The simulated chip. Results do not depend on its sizes (the arithmetic is exact),
# only the cycle counts do.
CHIP = CHIP_PRESETS["default"]


def _sites(pair, sep: str) -> tuple[str | None, str | None]:
    """The two sites of a pair's name (``A+B``, ``A|B``), for running it kernel by kernel."""
    if pair is None:
        return None, None
    first, second = pair.split(sep)
    return first, second


class RTLBackend:
    """The kernel interface of :class:`mixgcn.host.backends.GoldenBackend`, on the chip."""

    name = "rtl"

    def __init__(self, dut, config=CHIP, pipeline: bool = True):
        from cocotb.task import resume

        from mixgcn.sim.chip_driver import ChipKernels

        self.kern = ChipKernels(dut, config)
        self.config = config
        self.pipeline = pipeline  # False: every kernel alone (to measure the pipeline)
        self.fmt = NumberFormat(width=config.sae.width, acc_width=config.sae.acc_width)
        self.cycles = defaultdict(int)  # per operation kind
        self.busy = defaultdict(int)  # per engine
        self.batches = []  # (kind, site, cycles, sae busy, dce busy) of every batch
        self.sim_seconds = 0.0  # wall time while the chip ran (the rest: host work)
        self._await = resume(self._await_async)

    @staticmethod
    async def _await_async(fn, *args, **kwargs):
        return await fn(*args, **kwargs)

    def _record(self, kind: str, site, res) -> None:
        # a fused batch is counted once, under its combined kind ("spmm+gemm_xwt")
        self.cycles[kind] += res.cycles
        sae, dce = res.counters["sae_busy_cycles"], res.counters["dce_busy_cycles"]
        self.busy["sae"] += sae
        self.busy["dce"] += dce
        self.batches.append((kind, site, res.cycles, sae, dce))
        self.sim_seconds += res.wall_seconds

    def _sparse(self, s) -> sp.csr_array:
        """S as CSR, its longest row checked against the accumulators."""
        s = sp.csr_array(s)
        deg = s.indptr[1:] - s.indptr[:-1]
        self.fmt.check_reduction(int(deg.max()) if deg.size else 0, "SpMM row")
        return s

    def _dense(self, form: str, x) -> np.ndarray:
        """A GEMM's X, its reduction length checked against the accumulators."""
        x = np.asarray(x)
        self.fmt.check_reduction(x.shape[0] if form == "xtg" else x.shape[1],
                                 f"GEMM {form} reduction")
        return x

    def spmm(self, s, x, shift: int, relu=False, mask=None, site=None, kind="spmm"):
        s = self._sparse(s)
        out, stats, res = self._await(self.kern.spmm, s, x, shift, relu, mask)
        self._record(kind, site, res)
        return out, stats

    def spmm_gemm(self, s, x, shift: int, form: str, w, shift2: int, relu=False, mask=None,
                  site=None):
        """The fine-grain pipeline when A's rows fit the exchange port (F ≤ lanes) and
        the product one tile; otherwise the two kernels in turn."""
        L = self.config.lanes
        m = w.shape[1] if form == "xw" else w.shape[0]
        if not self.pipeline or x.shape[1] > L or m > L or form not in ("xw", "xwt"):
            first, second = _sites(site, "+")
            a, st1 = self.spmm(s, x, shift, site=first)
            z, st2 = self.gemm(form, a, w, shift2, relu=relu, mask=mask, site=second)
            return a, st1, z, st2
        a, st1, z, st2, res = self._await(self.kern.spmm_gemm, self._sparse(s), x, shift,
                                          form, w, shift2,
                                          relu2=relu, mask2=mask)
        self._record(f"spmm+gemm_{form}", site, res)
        return a, st1, z, st2

    def gemm_spmm(self, form: str, x, w, shift: int, s, shift2: int, relu=False, mask=None,
                  site=None):
        """The DCE→SAE pipeline when X is dense and T one tile; otherwise in turn."""
        m = w.shape[1] if form == "xw" else w.shape[0]
        if (not self.pipeline or sp.issparse(x) or m > self.config.lanes
                or form not in ("xw", "xwt")):
            first, second = _sites(site, "+")
            t, st1 = self.gemm(form, x, w, shift, site=first)
            z, st2 = self.spmm(s, t, shift2, relu=relu, mask=mask, site=second)
            return t, st1, z, st2
        t, st1, z, st2, res = self._await(self.kern.gemm_spmm, form, self._dense(form, x), w,
                                          shift, self._sparse(s), shift2, relu2=relu,
                                          mask2=mask)
        self._record(f"gemm_{form}+spmm", site, res)
        return t, st1, z, st2

    def spmm_and_gemm(self, s, h, shift: int, form: str, x, w, shift2: int, site=None):
        """An SpMM and an unrelated dense GEMM in one batch, one on each engine."""
        if not self.pipeline or sp.issparse(x):
            first, second = _sites(site, "|")
            y1, st1 = self.spmm(s, h, shift, site=first)
            y2, st2 = self.gemm(form, x, w, shift2, site=second)
            return y1, st1, y2, st2
        y1, st1, y2, st2, res = self._await(self.kern.spmm_and_gemm, self._sparse(s), h,
                                            shift, form, self._dense(form, x), w, shift2)
        self._record(f"spmm|gemm_{form}", site, res)
        return y1, st1, y2, st2

    def gemm(self, form: str, x, w, shift: int, relu=False, mask=None, site=None):
        if sp.issparse(x):  # sparse features: the SAE serves X·W and Xᵀ·G
            if form == "xw":
                return self.spmm(x, w, shift, relu, mask, site, kind="gemm_xw_sparse")
            if form == "xtg":
                return self.spmm(sp.csr_array(x.T), w, shift, relu, mask, site,
                                 kind="gemm_xtg_sparse")
            raise ValueError(f"GEMM {form} with a sparse left operand is not supported")
        out, stats, res = self._await(self.kern.gemm, form, self._dense(form, x), w, shift,
                                      relu, mask)
        self._record(f"gemm_{form}", site, res)
        return out, stats

    def summary(self) -> dict:
        """The JSON keys of a run: totals, per operation kind, and per site (``L1.fwd.agg``,
        or ``L1.fwd.comb+L1.fwd.agg`` for a pipelined pair) its runs, cycles and the
        cycles and engine busy cycles of its last run. A pair runs pipelined from the
        second time on (its first run precedes the delayed-scaling shift it needs)."""
        sites = {}
        for kind, site, cycles, sae, dce in self.batches:
            if site is None:
                continue
            rec = sites.setdefault(site, dict(kind=kind, runs=0, cycles=0))
            rec.update(runs=rec["runs"] + 1, cycles=rec["cycles"] + cycles,
                       last_cycles=cycles, last_sae_busy=sae, last_dce_busy=dce)
        return dict(cycles=sum(self.cycles.values()), sae_busy_cycles=self.busy["sae"],
                    dce_busy_cycles=self.busy["dce"], cycles_per_op=dict(self.cycles),
                    kernel_runs=len(self.batches), cycles_per_site=sites,
                    sim_seconds=self.sim_seconds, memory_words_written=self.kern.words_written,
                    memory_words_read=self.kern.words_read)


def train_rtl(args: dict) -> dict:
    """Run ``mixgcn train`` with ``args`` (the CLI's options as a dict) on the RTL
    backend: build the chip once (cached), train inside the simulator, return the
    metrics."""
    from mixgcn.sim.chip_harness import chip_harness_verilog
    from mixgcn.sim.runner import run_cocotb

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = dict(MIXGCN_TRAIN_ARGS=json.dumps(args), MIXGCN_TRAIN_OUT=str(out))
        print("mixgcn: building the simulated chip (cached after the first run)",
              file=sys.stderr, flush=True)
        # the memory model's bulk-transfer files: private to this run
        files = [f"+MIXGCN_MEM_LOAD={Path(tmp) / 'load.hex'}",
                 f"+MIXGCN_MEM_DUMP={Path(tmp) / 'dump.hex'}"]
        run_cocotb(chip_harness_verilog(CHIP), "chip_harness", "mixgcn.sim.rtl_train",
                   extra_env=env, quiet=True, lean=True, plusargs=files)
        if not out.is_file():
            raise RuntimeError("the RTL training run ended without a result")
        result = json.loads(out.read_text())
        if "error" in result:
            raise ValueError(result["error"])
        return result


def check_fits(dataset, config=CHIP) -> None:
    """Refuse, before building anything, a graph the simulated chip cannot hold: the
    SAE's buffer holds every row of an SpMM's dense operand (N rows for ``Â·H`` and
    ``Xᵀ·G``, F rows for sparse ``X·W``)."""
    rows = config.sae.max_nodes
    for what, n in (("nodes", dataset.num_nodes), ("features", dataset.num_features)):
        if n > rows:
            raise ValueError(f"{dataset.name} has {n} {what}; the simulated chip's SAE "
                             f"buffer holds {rows} rows (SAEConfig.max_nodes)")
