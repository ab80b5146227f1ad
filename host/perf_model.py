"""The chip's cycles, predicted: an analytic model of each descriptor and each batch.

The model reads what the chip would read — a batch's descriptors and the sparse
operands' CSR beats in the chip's memory — and predicts, without simulating a cycle
of the hardware, when each descriptor completes and so the batch's cycles. What it
knows of the hardware (docs/model.md):

- the controller issues descriptors in order, each once its unit is free; the sparse
  engine takes its commands in order, a command waiting while its bank is in use;
- a ``LOAD`` writes one row a cycle into its bank, from memory or, ``from_xchg``, as
  the dense engine's rows arrive;
- a ``SPMM`` takes one CSR beat a cycle; with ``follow`` a beat waits until every row
  it gathers is in the buffer — so the model walks the beats (numpy, one pass), and
  the graph's column order decides how much of a pass overlaps its load;
- an engine admits a row only with its output path's credit: at most
  ``out_fifo_depth`` rows in its credit loop (the engine's and the output stage's
  pipelines, :attr:`Latencies.loop_extra` more), which bounds the dense engine's rows a
  cycle when ``out_fifo_depth`` is smaller than the loop;
- a ``GEMM`` (``XW``, ``XWT``) loads its ``b_len`` weight words, then takes one ``a``
  word a cycle (⌈k/R⌉ a row); ``from_xchg``, each row when the sparse engine has
  finished it; ``XTG`` takes one (a, b) pair a cycle and drains ``k`` rows.

The fixed latencies (:class:`Latencies`: pipeline depths, the memory's answer, the
status record) are the model's only constants; docs/model.md says how they were
measured on the RTL. Everything else comes from the configuration and the operands.

:class:`ModelDevice` is a device (``host/device.py``) that answers ``run`` with the
model's cycles and every read with zeros: a training run through it predicts every
batch of a real run without building anything. :class:`ModelTap` sits in front of a
real device and records, for every batch, the model's cycles beside the device's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mixgcn.gen.config import MEMORY_PROFILES, ChipConfig, MemoryProfile
from mixgcn.hdl.controller import Unit
from mixgcn.hdl.dce import DCEOp, MACArray
from mixgcn.hdl.output_stage import OutputStage
from mixgcn.hdl.sae import AggregationPipeline
from mixgcn.host.chip_driver import PlanningDevice
from mixgcn.host.device import BatchResult, StatusRecord
from mixgcn.host.packing import to_ints, unpack_unsigned

__all__ = ["BatchPrediction", "Latencies", "ModelDevice", "ModelTap", "PerfModel", "WorkCounter",
           "kernel_macs"]


@dataclass(frozen=True)
class Latencies:
    """The fixed latencies of the chip's pipelines, in cycles (docs/model.md)."""

    # a LOAD: from its issue to its first row in the bank (the reader's request and
    # the memory's answer), and from its last row to its status record
    load_first: int = 3
    load_done: int = 2
    # a beat gathers a row at the soonest this long after the row entered the bank
    gather: int = 2
    # an SPMM's first beat after its issue, and from its last beat to its status record
    spmm_first: int = 3
    spmm_done: int = 16
    # a row's credit loop (from its admission to leaving the output FIFO) beyond the
    # engine's and the output stage's pipelines
    loop_extra: int = 3
    # the dense engine: the first word after the issue; from the last row's
    # admission to the status record, beyond the credit loop
    gemm_first: int = 4
    gemm_done: int = 3
    # XW / XWT: the cycle between the last weight word and the first row (that word
    # reaches the weight store's RAMs from registers)
    gemm_settle: int = 1
    # an XTG: from its last pair to the status record, beyond its k drained rows
    xtg_done: int = 22
    # an exchanged row: from leaving one engine to entering the other
    xchg: int = 4
    # from the last descriptor's completion to the batch's end as the device counts it
    # (its status record, the controller going idle)
    batch_end: int = 11


@dataclass
class BatchPrediction:
    """A batch as the model sees it: its cycles and each descriptor's completion
    (cycles from the batch's start), in descriptor order."""

    cycles: int
    done: list[int] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    words: int = 0  # the words the batch moves to and from memory


class PerfModel:
    """Predict a batch's cycles on a chip of configuration ``config`` attached to the
    memory ``memory`` (a :class:`~mixgcn.gen.config.MemoryProfile`)."""

    def __init__(self, config: ChipConfig, memory: MemoryProfile = MEMORY_PROFILES["ideal"],
                 latencies: Latencies = Latencies()):
        from mixgcn.hdl.chip import ChipLayouts

        self.config, self.memory, self.lat = config, memory, latencies
        self.lay = ChipLayouts(config)
        self.E = config.sae.edges
        # cycles a word takes through a memory reader: it asks only for words its
        # buffer has room for, so it covers the latency with reader_depth words
        self.word = max(1.0, (memory.latency + 2) / config.reader_depth)
        # Bursts (docs/memory.md): a channel keeps the memory's turn while its next word
        # is in the burst it has open. A reader whose reader_depth words take the memory
        # less time than a request's round trip runs out of requests first, so with
        # other streams at work every turn of up to reader_depth words reopens a burst —
        # and the reader's requests wait for the opening. Otherwise a turn lasts a burst.
        word_time = self.lay.mem_width / memory.bandwidth if memory.bandwidth else 1.0
        self.short_turns = bool(memory.burst) and (
            memory.latency + 2 > config.reader_depth * word_time)
        self.turn_words = (config.reader_depth if self.short_turns
                           else max(1, memory.burst * 8 // self.lay.mem_width))
        # a reader whose words are interleaved with another stream's reopens its burst
        # for each word that follows one of theirs, and that request waits for it
        self.open_cycles = memory.burst_cycles if self.short_turns else 0
        self.word_beside = self.gemm_word(1)  # another stream's word before each of its

        # cycles a row takes through an engine's output path: a FIFO's depth of rows
        # per credit loop (the pipelines between admission and the FIFO, as hdl/ builds
        # them)
        d, sa = config.dce, config.sae
        # (the array's word register s1 and its feed register stand around its stages)
        self.dce_loop = (1 + MACArray.latency(d.rows) + 1 + latencies.loop_extra
                         + OutputStage.latency(d.cols))
        self.sae_loop = (AggregationPipeline.LATENCY + latencies.loop_extra
                         + OutputStage.latency(sa.lanes))

    def gemm_word(self, chunks: int) -> float:
        """Cycles a GEMM's ``a`` word takes through its reader: its rows' writes, one
        for every ``chunks`` words it reads, reopen its burst as often."""
        return max(1.0, (self.memory.latency + 2 + self.open_cycles * min(1.0, 1 / chunks))
                   / self.config.reader_depth)

    # ------------------------------------------------------------- descriptors
    def decode(self, descriptors) -> list[dict]:
        """Packed descriptors as dicts of int fields."""
        out = []
        for word in to_ints(descriptors):
            v = self.lay.desc_layout.from_bits(word)
            out.append({name: int(getattr(getattr(v, name), "value", getattr(v, name)))
                        for name in self.lay.desc_layout.members})
        return out

    def beats(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each beat's largest gathered row (-1: none) and whether it ends a row."""
        csr = self.lay.stream_layouts["csr"]
        col = unpack_unsigned(csr, words, "col")
        count = unpack_unsigned(csr, words, "count")[:, 0]
        used = np.arange(self.E)[None, :] < count[:, None]
        top = np.where(used, col, -1).max(axis=1)
        return top, unpack_unsigned(csr, words, "last")[:, 0].astype(bool)

    @staticmethod
    def _paced(ready: np.ndarray, period: float) -> np.ndarray:
        """When each of a sequence of items goes: item i at the soonest at ``ready[i]``
        and ``period`` after the item before it."""
        if not len(ready):
            return ready.astype(float)
        step = np.arange(len(ready)) * period
        return step + np.maximum.accumulate(ready - step)

    @staticmethod
    def _credited(ready: np.ndarray, period: float, ends: np.ndarray, depth: int,
                  loop: int) -> np.ndarray:
        """As :meth:`_paced`, where an item that ends a row (``ends``) also needs the
        output path's credit: at most ``depth`` rows in the ``loop`` cycles from their
        admission to leaving the output FIFO. One step per item (a short Python loop:
        a batch's beats or rows)."""
        out = np.empty(len(ready))
        admitted: list[float] = []
        t = -np.inf
        for i, (r, e) in enumerate(zip(ready.tolist(), ends.tolist(), strict=True)):
            t = max(t + period, r)
            if e:
                if len(admitted) >= depth:
                    t = max(t, admitted[-depth] + loop)
                admitted.append(t)
            out[i] = t
        return out

    # ------------------------------------------------------------------- batch
    def batch(self, descs: list[dict], csr_words) -> BatchPrediction:
        """The cycles of a batch of decoded descriptors; ``csr_words(addr, n)`` returns
        the ``n`` CSR beats at ``addr`` (packed words)."""
        lat = self.lat
        # the sparse engine's readers share the memory with a dense engine streaming
        # beside them (not one that feeds them through the exchange and is done before
        # most of the SpMM), and their turns then reopen bursts as the dense engine's do
        beside = any(Unit(d["unit"]) == Unit.GEMM and not d["to_xchg"] for d in descs) \
            and any(Unit(d["unit"]) == Unit.SPMM for d in descs)
        w = self.word_beside if beside else self.word
        free = {Unit.LOAD: 0.0, Unit.SPMM: 0.0, Unit.GEMM: 0.0}
        sae_taken = 0.0  # the sparse engine takes its commands in order
        bank_free = [0.0, 0.0]  # a bank is in use until the SPMM reading it completes
        bank_rows: list[np.ndarray | None] = [None, None]  # when each row entered a bank
        gemm_rows: np.ndarray | None = None  # when each GEMM row entered the exchange
        sae_rows: list[np.ndarray] = []  # when each SPMM row entered the exchange
        fed: list[tuple[int, dict, float]] = []  # GEMMs fed by the SAE: index, desc, start
        words = 0  # every word the batch moves, for the memory's bandwidth
        pred = BatchPrediction(cycles=0)
        done_at: list[float] = []
        issue = 0.0  # descriptors issue in order: each when its unit takes it
        for d in descs:
            unit = Unit(d["unit"])
            issue += 1
            if unit == Unit.FENCE:
                done = max([issue, *done_at])
            elif unit == Unit.LOAD:
                b = d["bank"]
                start = issue = max(issue, free[Unit.LOAD], sae_taken, bank_free[b])
                sae_taken = start
                ready = np.full(d["rows"], start + lat.load_first, dtype=float)
                if d["from_xchg"]:
                    src = gemm_rows if gemm_rows is not None else ready
                    ready = np.maximum(ready, src[:d["rows"]] + lat.xchg)
                    t = self._paced(ready, 1.0)
                else:
                    t = self._paced(ready, w)
                    words += d["rows"]
                bank_rows[b] = t
                done = (t[-1] if len(t) else start) + lat.load_done
                free[Unit.LOAD] = done
            elif unit == Unit.SPMM:
                b = d["bank"]
                start = issue = max(issue, free[Unit.SPMM], sae_taken)
                sae_taken = start
                rows_at = bank_rows[b]
                top, last = self.beats(csr_words(d["src"], d["src_len"]))
                first = start + lat.spmm_first
                need = np.full(len(top), first, dtype=float)
                if rows_at is not None and len(rows_at):
                    gathers = top >= 0
                    need[gathers] = np.maximum(
                        first, rows_at[np.minimum(top[gathers], len(rows_at) - 1)] + lat.gather)
                    if not d["follow"]:  # waits for the whole load
                        need = np.maximum(need, rows_at[-1] + lat.gather)
                # a beat a word, as the CSR reader brings them; a row's last beat with
                # its output path's credit (kept sums need none)
                sa = self.config.sae
                t = self._credited(need, w, last & (not d.get("keep")), sa.out_fifo_depth,
                                   self.sae_loop)
                ends = t[last]
                finish = ends[-1] if len(ends) else (t[-1] if len(t) else first)
                done = finish + lat.spmm_done
                words += d["src_len"] + (d["rows"] if d["to_mem"] else 0) \
                    + (d["rows"] if d["mask"] else 0)
                if d["to_xchg"]:
                    sae_rows.append(ends + lat.xchg)
                free[Unit.SPMM] = bank_free[b] = done
            else:  # GEMM
                start = issue = max(issue, free[Unit.GEMM])
                words += d["b_len"] + (0 if d["from_xchg"] else d["src_len"]) \
                    + (d["rows"] if d["mask"] and d["op"] != DCEOp.XTG.value else 0)
                if d["op"] == DCEOp.XTG.value:
                    done = start + lat.gemm_first + d["rows"] * w + d["k"] + lat.xtg_done
                    words += d["k"]
                elif d["from_xchg"]:
                    # its rows come from SPMMs issued before and after it: its
                    # completion is known once the batch's SPMMs are
                    fed.append((len(done_at), d, start))
                    done = start
                else:
                    out = self._gemm_rows(d, start, None)
                    done = (out[-1] if len(out) else start) + lat.gemm_done
                    if d["to_xchg"]:
                        gemm_rows = out
                    words += d["rows"] if d["to_mem"] else 0
                free[Unit.GEMM] = done
            done_at.append(done)
            pred.units.append(unit)
        rows = np.sort(np.concatenate(sae_rows)) if sae_rows else np.zeros(0)
        for i, d, start in fed:
            out = self._gemm_rows(d, start, rows)
            done_at[i] = (out[-1] if len(out) else start) + lat.gemm_done
            words += d["rows"] if d["to_mem"] else 0
        end = max(done_at, default=0.0)
        if self.memory.bandwidth:  # the memory's words a cycle bound the whole batch
            # and every turn of a channel opens a burst
            opens = words / self.turn_words if self.memory.burst else 0
            end = max(end, words * self.lay.mem_width / self.memory.bandwidth
                      + opens * self.memory.burst_cycles)
        pred.done, pred.words = [round(x) for x in done_at], words
        pred.cycles = round(end) + lat.batch_end
        return pred

    def _gemm_rows(self, d: dict, start: float, rows_in: np.ndarray | None) -> np.ndarray:
        """When each output row of an XW / XWT GEMM leaves the dense engine: after its
        weights, a row per ⌈k/R⌉ words, at the output path's pace, each row (from the
        exchange) at the soonest when it arrives."""
        lat = self.lat
        chunks = max(1, -(-d["k"] // self.config.dce.rows))
        base = start + lat.gemm_first + d["b_len"] * self.word + lat.gemm_settle
        ready = np.full(d["rows"], base, dtype=float)
        period = chunks * self.gemm_word(chunks)
        if rows_in is not None:  # a row a word, from the exchange
            ready, period = np.maximum(ready, rows_in[:d["rows"]]), float(chunks)
        t = self._credited(ready, period, np.ones(len(ready), dtype=bool),
                           self.config.dce.out_fifo_depth, self.dce_loop)
        return t + chunks + self.dce_loop


class _Memory:
    """The CSR words a model device was written (the rest it does not need)."""

    def __init__(self):
        self.writes: list[tuple[int, np.ndarray]] = []

    def write(self, addr: int, words: np.ndarray) -> None:
        end = addr + len(words)
        # an older write any of whose words this one overwrites is forgotten whole: a
        # read never finds stale words in it, and the list stays as long as the
        # regions in use
        self.writes = [(a, w) for a, w in self.writes if a + len(w) <= addr or end <= a]
        self.writes.append((addr, np.asarray(words, dtype=np.uint8)))

    def read(self, addr: int, n: int) -> np.ndarray:
        for a, w in reversed(self.writes):
            if a <= addr and addr + n <= a + len(w):
                return w[addr - a:addr - a + n]
        raise ValueError(f"the model was never written words {addr}..{addr + n - 1}")


class ModelDevice(PlanningDevice):
    """A device that predicts: every batch answered with the model's cycles (and its
    status records with each descriptor's), every read with zeros. Named ``model`` in
    reports; it computes nothing."""

    backend = "model"

    def __init__(self, config: ChipConfig, name: str = "model",
                 memory: MemoryProfile = MEMORY_PROFILES["ideal"],
                 latencies: Latencies = Latencies()):
        super().__init__(config, name=name)
        self.model = PerfModel(config, memory, latencies)
        self.memory = _Memory()

    def write(self, addr: int, words) -> None:
        super().write(addr, words)
        self.memory.write(addr, words)

    def run(self, descriptors, *, budget: int, label: str, **_) -> BatchResult:
        p = self.model.batch(self.model.decode(descriptors), self.memory.read)
        return BatchResult(cycles=p.cycles, status=[
            StatusRecord(i, u, done, 1, 0)
            for i, (u, done) in enumerate(zip(p.units, p.done, strict=True))])


class ModelTap:
    """A real device with the model beside it: every call goes to ``device``, and
    every batch's prediction is recorded in :attr:`predictions` as (label, model
    cycles, device cycles)."""

    def __init__(self, device, memory: MemoryProfile = MEMORY_PROFILES["ideal"],
                 latencies: Latencies = Latencies()):
        self.device = device
        self.model = PerfModel(device.config, memory, latencies)
        self.memory = _Memory()
        self.predictions: list[tuple[str, int, int]] = []
        self.words: list[tuple[int, int]] = []

    def __getattr__(self, name):
        return getattr(self.device, name)

    def write(self, addr: int, words) -> None:
        self.device.write(addr, words)
        self.memory.write(addr, words)

    def run(self, descriptors, *, budget: int, label: str, **options) -> BatchResult:
        res = self.device.run(descriptors, budget=budget, label=label, **options)
        p = self.model.batch(self.model.decode(descriptors), self.memory.read)
        self.predictions.append((label, p.cycles, res.cycles))
        self.words.append((p.words, res.counters.get("memory_reads", 0)
                           + res.counters.get("memory_writes", 0)))
        return res


def kernel_macs(kind: str, a, b) -> int:
    """The multiply-accumulates a kernel needs, counted from its operands (not from
    the hardware): an SpMM ``S·X`` the non-zeros of S times X's columns; a GEMM
    ``X·W`` / ``X·Wᵀ`` / ``Xᵀ·G`` its rows × reduction × output columns, with a sparse
    X counting its non-zeros instead of rows × reduction."""
    import scipy.sparse as sp

    if kind == "spmm":
        return int(sp.csr_array(a).nnz) * int(np.shape(b)[1])
    out = np.shape(b)[0] if kind == "xwt" else np.shape(b)[1]
    terms = int(a.nnz) if sp.issparse(a) else int(np.prod(np.shape(a)))
    return terms * int(out)


class WorkCounter:
    """A backend in front of ``backend`` that counts the useful multiply-accumulates
    of every kernel it passes on (:func:`kernel_macs`), in :attr:`macs`."""

    def __init__(self, backend):
        self.backend, self.macs = backend, 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def spmm(self, s, x, stage, *, site=""):
        self.macs += kernel_macs("spmm", s, x)
        return self.backend.spmm(s, x, stage, site=site)

    def gemm(self, form, x, w, stage, *, site=""):
        self.macs += kernel_macs(form, x, w)
        return self.backend.gemm(form, x, w, stage, site=site)

    def spmm_gemm(self, s, x, form, w, stages, *, sites=("", "")):
        # the GEMM's operand is the SpMM's output: S's rows by X's columns, dense
        self.macs += kernel_macs("spmm", s, x) + kernel_macs(
            form, np.empty((s.shape[0], np.shape(x)[1]), dtype=np.int8), w)
        return self.backend.spmm_gemm(s, x, form, w, stages, sites=sites)

    def gemm_spmm(self, form, x, w, s, stages, *, sites=("", "")):
        out = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        self.macs += kernel_macs(form, x, w) + kernel_macs(
            "spmm", s, np.empty((np.shape(x)[0], out), dtype=np.int8))
        return self.backend.gemm_spmm(form, x, w, s, stages, sites=sites)

    def spmm_and_gemm(self, s, h, form, x, w, stages, *, sites=("", "")):
        self.macs += kernel_macs("spmm", s, h) + kernel_macs(form, x, w)
        return self.backend.spmm_and_gemm(s, h, form, x, w, stages, sites=sites)

