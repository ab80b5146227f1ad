"""The RTL backend: every SpMM and GEMM of training executed by the simulated engines.

The generated Verilog of an SAE and a DCE, each fed from memories
(:mod:`mixgcn.sim.harness`), runs under Verilator. The training loop runs inside the
simulator process in a thread (``cocotb.bridge``); each kernel call bulk-loads the
operands into the source memories, starts the engine and waits for its last row
(``cocotb.resume``), so no Python acts per cycle. Sparse operands go to the SAE
(``Â·H``; ``X·W`` and ``Xᵀ·G`` when the features are sparse), dense ones to the DCE.

This is the engine-level backend: kernels run one after another, each as a separate
run of its engine, so ``cycles`` is the sum of the kernels' cycles (the chip that
overlaps SAE and DCE through its pipeline FIFOs is the next step).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mixgcn.gen.config import DCEConfig, SAEConfig
from mixgcn.golden.fixed import OutputStats
from mixgcn.host.backends import NumberFormat
from mixgcn.sim.dce_model import weight_words
from mixgcn.sim.packing import csr_beat_arrays, pack

__all__ = ["DCE_CONFIG", "SAE_CONFIG", "RTLBackend", "harness_verilog", "train_rtl"]

# Engines of the simulated backend. Results do not depend on their sizes (the
# arithmetic is exact), only the cycle counts do.
SAE_CONFIG = SAEConfig(lanes=8, edges=2, max_nodes=8192, out_fifo_depth=16)
DCE_CONFIG = DCEConfig(rows=8, cols=8, max_k=2048, max_rows=65536, out_fifo_depth=16)
DCE_DEPTH = 8192  # words per DCE source memory (rows × ⌈K/R⌉ of one tile run)
CSR_DEPTH = 1 << 16  # beats per SpMM


def harness_verilog() -> str:
    """The Verilog of the simulated engines and their feeds. Converting it takes a while
    (its memories' initial contents), so it is cached under the build folder, keyed by
    everything it is generated from: the configurations and the generating sources."""
    import hashlib

    import amaranth
    from amaranth.back import verilog

    import mixgcn.gen.config
    import mixgcn.hdl
    from mixgcn.sim import harness
    from mixgcn.sim.runner import BUILD_ROOT

    h = hashlib.sha256(repr((SAE_CONFIG, DCE_CONFIG, DCE_DEPTH, CSR_DEPTH,
                             amaranth.__version__)).encode())
    sources = [*sorted(Path(mixgcn.hdl.__file__).parent.glob("*.py")),
               Path(harness.__file__), Path(mixgcn.gen.config.__file__)]
    for src in sources:
        h.update(src.read_bytes())
    cached = BUILD_ROOT / f"rtl-harness-{h.hexdigest()[:16]}.v"
    if cached.is_file():
        return cached.read_text()
    top = harness.Harness([harness.sae_feed(SAE_CONFIG, CSR_DEPTH),
                           harness.dce_feed(DCE_CONFIG, DCE_DEPTH)])
    text = verilog.convert(top, name="harness", emit_src=False)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(text)
    return text


def _mask_words(mask: np.ndarray) -> list[int]:
    bits = np.asarray(mask, dtype=np.int64) << np.arange(mask.shape[1], dtype=np.int64)
    return bits.sum(axis=1).tolist()


class RTLBackend:
    """The kernel interface of :class:`mixgcn.host.backends.GoldenBackend`, on the RTL."""

    name = "rtl"

    def __init__(self, dut):
        from cocotb.task import resume

        from mixgcn.hdl.dce import DCELayouts
        from mixgcn.hdl.sae import SAELayouts

        self.dut = dut
        self.fmt = NumberFormat(width=SAE_CONFIG.width, acc_width=SAE_CONFIG.acc_width)
        self.sl, self.dl = SAELayouts(SAE_CONFIG), DCELayouts(DCE_CONFIG)
        # words arrive packed (mixgcn.sim.packing): the feed driver writes them as ints
        self.streams = {"sae": ("cmd", "x", "csr", "mask"), "dce": ("cmd", "a", "b", "mask")}
        self.cycles = defaultdict(int)  # per operation kind
        self.busy = defaultdict(int)  # per engine
        self.runs = 0
        self.loaded = {}  # what each source memory holds (see run_feed)
        self._run = resume(self._run_async)

    async def _run_async(self, engine, images, rows, lanes):
        from mixgcn.sim.feed_driver import run_feed

        layouts = dict.fromkeys(self.streams[engine])
        out_layout = (self.sl if engine == "sae" else self.dl).out_layout
        return await run_feed(self.dut, engine, layouts, images, rows, out_layout, lanes,
                              loaded=self.loaded)

    def _record(self, kind, engine, res):
        self.cycles[kind] += res["cycles"]
        self.busy[engine] += res["busy_cycles"]
        self.runs += 1

    # ------------------------------------------------------------------ SpMM on the SAE
    def spmm(self, s, x, shift: int, relu=False, mask=None, kind="spmm"):
        cfg = SAE_CONFIG
        s = sp.csr_array(s)
        x = np.asarray(x, dtype=np.int64)
        n, k = s.shape
        deg = np.diff(s.indptr)
        self.fmt.check_reduction(deg.max() if deg.size else 0, "SpMM row")
        if k > cfg.max_nodes or n > cfg.max_nodes:
            raise ValueError(f"SpMM of {s.shape} exceeds the simulated SAE's "
                             f"{cfg.max_nodes}-row buffer")
        beats = pack(self.sl.csr_layout, csr_beat_arrays(s, cfg.edges))
        if len(beats) > CSR_DEPTH:
            raise ValueError(f"SpMM needs {len(beats)} beats; the harness holds {CSR_DEPTH}")
        L = cfg.lanes
        out = np.zeros((n, x.shape[1]), dtype=np.int64)
        max_abs = saturated = 0
        for f0 in range(0, x.shape[1], L):
            f1 = min(f0 + L, x.shape[1])
            xs = np.zeros((k, L), dtype=np.int64)
            xs[:, :f1 - f0] = x[:, f0:f1]
            cmds = [dict(op=0, bank=0, rows=k, shift=0, relu=0, mask=0),
                    dict(op=1, bank=0, rows=n, shift=shift, relu=int(relu),
                         mask=int(mask is not None))]
            images = {"cmd": ([self.sl.cmd_layout.const(c).as_bits() for c in cmds], 2, 2),
                      "x": (pack(self.sl.x_layout, xs), k, k),
                      "csr": (beats, len(beats), len(beats))}
            if mask is not None:
                pm = np.zeros((n, L), dtype=bool)
                pm[:, :f1 - f0] = np.asarray(mask)[:, f0:f1]
                images["mask"] = (_mask_words(pm), n, n)
            res, rows = self._run("sae", images, n, L)
            out[:, f0:f1] = rows[:, :f1 - f0]
            max_abs, saturated = max(max_abs, res["max_abs"]), saturated + res["saturated"]
            self._record(kind, "sae", res)
        return out, OutputStats(max_abs=max_abs, saturated=saturated)

    # ---------------------------------------------------------------- GEMM on the DCE
    def gemm(self, form: str, x, w, shift: int, relu=False, mask=None):
        if sp.issparse(x):  # sparse features: the SAE serves X·W and Xᵀ·G
            if form == "xw":
                return self.spmm(x, w, shift, relu, mask, kind="gemm_xw_sparse")
            if form == "xtg":
                return self.spmm(sp.csr_array(x.T), w, shift, relu, mask,
                                 kind="gemm_xtg_sparse")
            raise ValueError(f"GEMM {form} with a sparse left operand is not supported")
        x, w = np.asarray(x, dtype=np.int64), np.asarray(w, dtype=np.int64)
        k = x.shape[0] if form == "xtg" else x.shape[1]
        self.fmt.check_reduction(k, f"GEMM {form} reduction")
        if form == "xtg":
            return self._xtg(x, w, shift, relu)
        return self._xw(form, x, w, shift, relu, mask)

    def _dce(self, kind, cmd, a_words, b_words, mask_words, rows):
        a_words, b_words = pack(self.dl.a_layout, a_words), pack(self.dl.b_layout, b_words)
        images = {"cmd": ([self.dl.cmd_layout.const(cmd).as_bits()], 1, 1),
                  "a": (a_words, len(a_words), max(1, len(a_words))),
                  "b": (b_words, len(b_words), max(1, len(b_words)))}
        if mask_words:
            images["mask"] = (mask_words, len(mask_words), len(mask_words))
        res, out = self._run("dce", images, rows, DCE_CONFIG.cols)
        self._record(kind, "dce", res)
        return res, out

    def _xw(self, form, x, w, shift, relu, mask):
        cfg = DCE_CONFIG
        R, C, V = cfg.rows, cfg.cols, cfg.b_lanes
        n, k = x.shape
        mtot = w.shape[1] if form == "xw" else w.shape[0]
        if k > cfg.max_k:
            raise ValueError(f"GEMM reduction {k} exceeds the simulated DCE's max_k {cfg.max_k}")
        chunks = -(-k // R)
        xp = np.zeros((n, chunks * R), dtype=np.int64)
        xp[:, :k] = x
        block = max(1, DCE_DEPTH // chunks)  # rows per run: the source memory's reach
        out = np.zeros((n, mtot), dtype=np.int64)
        max_abs = saturated = 0
        for m0 in range(0, mtot, C):
            m1 = min(m0 + C, mtot)
            b = weight_words(form, w[:, m0:m1] if form == "xw" else w[m0:m1], R, V)
            for r0 in range(0, n, block):
                r1 = min(r0 + block, n)
                a = xp[r0:r1].reshape(-1, R)
                mw = []
                if mask is not None:
                    pm = np.zeros((r1 - r0, C), dtype=bool)
                    pm[:, :m1 - m0] = np.asarray(mask)[r0:r1, m0:m1]
                    mw = _mask_words(pm)
                cmd = dict(op=0 if form == "xw" else 1, rows=r1 - r0, k=k, m=m1 - m0,
                           shift=shift, relu=int(relu), mask=int(mask is not None))
                res, rows = self._dce(f"gemm_{form}", cmd, a, b, mw, r1 - r0)
                out[r0:r1, m0:m1] = rows[:, :m1 - m0]
                max_abs = max(max_abs, res["max_abs"])
                saturated += res["saturated"]
        return out, OutputStats(max_abs=max_abs, saturated=saturated)

    def _xtg(self, x, g, shift, relu):
        cfg = DCE_CONFIG
        R, C, V = cfg.rows, cfg.cols, cfg.b_lanes
        n, k = x.shape
        mtot = g.shape[1]
        if n > DCE_DEPTH:
            raise ValueError(f"Xᵀ·G over {n} rows exceeds the harness's {DCE_DEPTH}-row memory")
        out = np.zeros((k, mtot), dtype=np.int64)
        max_abs = saturated = 0
        for k0 in range(0, k, R):
            k1 = min(k0 + R, k)
            a = np.zeros((n, R), dtype=np.int64)
            a[:, :k1 - k0] = x[:, k0:k1]
            for m0 in range(0, mtot, C):
                m1 = min(m0 + C, mtot)
                b = np.zeros((n, V), dtype=np.int64)
                b[:, :m1 - m0] = g[:, m0:m1]
                cmd = dict(op=2, rows=n, k=k1 - k0, m=m1 - m0, shift=shift, relu=int(relu),
                           mask=0)
                res, rows = self._dce("gemm_xtg", cmd, a, b, [], k1 - k0)
                out[k0:k1, m0:m1] = rows[:, :m1 - m0]
                max_abs = max(max_abs, res["max_abs"])
                saturated += res["saturated"]
        return out, OutputStats(max_abs=max_abs, saturated=saturated)

    def summary(self) -> dict:
        return dict(cycles=sum(self.cycles.values()), sae_busy_cycles=self.busy["sae"],
                    dce_busy_cycles=self.busy["dce"], cycles_per_op=dict(self.cycles),
                    kernel_runs=self.runs)


def train_rtl(args: dict) -> dict:
    """Run ``mixgcn train`` with ``args`` (the CLI's options as a dict) on the RTL
    backend: build the harness once (cached), train inside the simulator, return the
    metrics."""
    from mixgcn.sim.runner import run_cocotb

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = dict(MIXGCN_TRAIN_ARGS=json.dumps(args), MIXGCN_TRAIN_OUT=str(out))
        print("mixgcn: building the simulated engines (cached after the first run)",
              file=sys.stderr, flush=True)
        run_cocotb(harness_verilog(), "harness", "mixgcn.sim.rtl_train", extra_env=env,
                   quiet=True)
        if not out.is_file():
            raise RuntimeError("the RTL training run ended without a result")
        return json.loads(out.read_text())


