"""The backend protocol: the integer kernels a training step runs, and the functional
model that defines them.

A *backend* executes kernels on mantissas (docs/numbers.md): an SpMM ``S · X`` or a
GEMM (``X·W``, ``X·Wᵀ``, ``Xᵀ·G``), each followed by the output stage, and returns
the output mantissas with the stage's :class:`~mixgcn.golden.fixed.OutputStats`.
Exponents, and everything in floating point, stay on the host
(:mod:`mixgcn.host.precision`). Three *pairs* let a chip overlap two kernels:

- :meth:`Backend.spmm_gemm` — an SpMM whose rows feed a GEMM (the fine-grain
  pipeline: the GEMM starts on a row as soon as the SpMM has finished it);
- :meth:`Backend.gemm_spmm` — a GEMM whose rows fill the operand of an SpMM;
- :meth:`Backend.spmm_and_gemm` — an SpMM beside an unrelated GEMM (one per engine).

A pair's results are by definition those of its two kernels run one after the other:
the pairing changes cycles, never bits. ``site`` names the operation in the model
(``L1.bwd.agg``) for a backend's accounting; it never changes a result.

:class:`GoldenBackend` is the reference (pure numpy, bit-exact); the RTL backend
(:mod:`mixgcn.host.chip_driver`) runs the same calls on a chip and must match it bit
for bit. Every backend reports what its device did in a :class:`DeviceReport`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp

from mixgcn.golden import fixed
from mixgcn.golden.fixed import OutputStats

__all__ = [
    "Backend",
    "BatchRecord",
    "DeviceReport",
    "GoldenBackend",
    "KernelResult",
    "NumberFormat",
    "PairResult",
    "Stage",
]


@dataclass(frozen=True)
class NumberFormat:
    """Data and accumulator widths of the engines (docs/numbers.md)."""

    width: int = 16
    acc_width: int = 48

    def __post_init__(self):
        fixed.mant_range(self.width)  # validates the width
        if not (isinstance(self.acc_width, int) and 2 * self.width <= self.acc_width <= 64):
            raise ValueError(
                f"acc_width must be an integer in {2 * self.width}..64, got {self.acc_width!r}"
            )

    def check_reduction(self, length: int, what: str) -> None:
        """Refuse a reduction of ``length`` products the accumulators could overflow on."""
        try:
            fixed.check_accumulator(self.width, self.acc_width, max(int(length), 1))
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None


@dataclass(frozen=True, eq=False)
class Stage:
    """The output stage of one kernel: ``shift`` right with round half to even, then
    ``relu``, saturation, and ``mask`` (bool, the output's shape; ``None``: no mask)."""

    shift: int
    relu: bool = False
    mask: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class KernelResult:
    """One kernel's output mantissas (int64 ``[rows, columns]``) and its stage's stats."""

    rows: np.ndarray
    stats: OutputStats


@dataclass(frozen=True, eq=False)
class PairResult:
    """The two kernels of a pair, in the order the pair names them."""

    first: KernelResult
    second: KernelResult


@dataclass(frozen=True)
class BatchRecord:
    """One batch a device ran: its ``kind`` (``spmm``, ``gemm_xw``, ``gemm_xw_sparse``
    (a GEMM with a sparse left operand, on the sparse engine), or a pair's two kinds
    joined by ``+`` (``pairing`` "pipelined") or ``|`` ("beside")), the model's sites
    it served, its cycles, each engine's busy cycles within it and the words the chip's
    memory moved for it (``memory_reads``, ``memory_writes``, and
    ``memory_distinct_reads``: each word read counted once; 0 where the device does not
    count them), and the sparse engine's buffer loads it issued (``buffer_loads``: one
    per pass of L features, more in column windows) and the rows of X they loaded
    (``buffer_rows_loaded``)."""

    kind: str
    sites: tuple[str, ...]
    pairing: str  # "alone", "pipelined" or "beside"
    cycles: int
    sae_busy: int
    dce_busy: int
    memory_reads: int = 0
    memory_writes: int = 0
    memory_distinct_reads: int = 0
    buffer_loads: int = 0
    buffer_rows_loaded: int = 0


@dataclass
class DeviceReport:
    """What a backend's device did over a run.

    ``cycles`` is ``None`` on a backend that does not model time (the functional
    model); a chip reports its own cycle counters. ``words_written`` / ``words_read``
    count the memory words the host moved to and from the device, ``device_seconds``
    the wall time the device spent running batches (for a simulated chip: the
    simulator alone; the rest of a run's time is the host's and the transfers').
    """

    backend: str
    kernel_runs: int = 0
    cycles: int | None = None
    batches: list[BatchRecord] = field(default_factory=list)
    words_written: int = 0
    words_read: int = 0
    device_seconds: float = 0.0
    chip: dict | None = None  # the chip's configuration (ChipConfig.to_dict())
    parallel: dict | None = None  # P chips: sharding, bytes moved (host.sharded)
    # the device counts the words the chip's memory moved (a simulated memory does; a
    # board's does not, and its JSON then has no chip_words_* keys rather than zeros)
    memory_counted: bool = True
    # ... and which of the words read were distinct (the memory model does; a DRAM's
    # controller does not, and the chip_words_read_distinct* keys are then absent)
    distinct_counted: bool = True

    def to_json(self) -> dict:
        """The report's keys in a run's JSON (README, "Command line")."""
        if self.cycles is None:
            return {"kernel_runs": self.kernel_runs, **(self.parallel or {})}
        per_op: dict[str, int] = {}
        per_site: dict[str, dict] = {}
        busy = {"sae": 0, "dce": 0}
        reads: dict[str, int] = {}
        distinct: dict[str, int] = {}
        writes = loads = rows_loaded = 0
        for b in self.batches:
            loads += b.buffer_loads
            rows_loaded += b.buffer_rows_loaded
            per_op[b.kind] = per_op.get(b.kind, 0) + b.cycles
            busy["sae"] += b.sae_busy
            busy["dce"] += b.dce_busy
            reads[b.kind] = reads.get(b.kind, 0) + b.memory_reads
            distinct[b.kind] = distinct.get(b.kind, 0) + b.memory_distinct_reads
            writes += b.memory_writes
            key = ("|" if b.pairing == "beside" else "+").join(b.sites)
            rec = per_site.setdefault(key, dict(kind=b.kind, sites=list(b.sites),
                                                pairing=b.pairing, runs=0, cycles=0))
            rec.update(runs=rec["runs"] + 1, cycles=rec["cycles"] + b.cycles,
                       last_cycles=b.cycles, last_sae_busy=b.sae_busy, last_dce_busy=b.dce_busy)
        chip_words = dict(chip_words_read=sum(reads.values()), chip_words_read_per_op=reads,
                          chip_words_written=writes)
        if self.distinct_counted:
            chip_words.update(chip_words_read_distinct=sum(distinct.values()),
                              chip_words_read_distinct_per_op=distinct)
        return dict(cycles=self.cycles, sae_busy_cycles=busy["sae"],
                    dce_busy_cycles=busy["dce"], cycles_per_op=per_op,
                    cycles_per_site=per_site, kernel_runs=self.kernel_runs,
                    sim_seconds=self.device_seconds, memory_words_written=self.words_written,
                    memory_words_read=self.words_read,
                    **(chip_words if self.memory_counted else {}),
                    buffer_loads=loads, buffer_rows_loaded=rows_loaded,
                    chip_config=self.chip,
                    **(self.parallel or {}))


@runtime_checkable
class Backend(Protocol):
    """What the training loop needs from whatever executes its kernels.

    Operands are int64 mantissas: ``s`` a CSR matrix, ``x``/``w``/``h`` dense arrays
    (``x`` may be CSR: sparse input features). GEMM ``form`` is ``xw`` (``X·W``),
    ``xwt`` (``X·Wᵀ``) or ``xtg`` (``Xᵀ·G``). A pair's ``sites`` and ``stages`` are
    in the order of its name; in ``spmm_gemm`` the GEMM's left operand and in
    ``gemm_spmm`` the SpMM's dense operand are the first kernel's output.
    """

    name: str
    fmt: NumberFormat

    def spmm(self, s, x, stage: Stage, *, site: str) -> KernelResult: ...

    def gemm(self, form: str, x, w, stage: Stage, *, site: str) -> KernelResult: ...

    def spmm_gemm(self, s, x, form: str, w, stages: tuple[Stage, Stage], *,
                  sites: tuple[str, str]) -> PairResult: ...

    def gemm_spmm(self, form: str, x, w, s, stages: tuple[Stage, Stage], *,
                  sites: tuple[str, str]) -> PairResult: ...

    def spmm_and_gemm(self, s, h, form: str, x, w, stages: tuple[Stage, Stage], *,
                      sites: tuple[str, str]) -> PairResult: ...

    def derive(self, new, source, *, rowwise: bool = False, site: str = "") -> None:
        """``new`` was computed on the host from ``source`` (an output of this backend),
        elementwise or, with ``rowwise``, row by row. A backend that places tensors on
        several chips keeps ``new`` where ``source`` is; one chip has nothing to do."""
        ...

    def report(self) -> DeviceReport: ...

    def close(self) -> None: ...


def reduction_length(form: str, x) -> int:
    """Products each accumulator of a GEMM sums: X's rows for ``xtg``, else its columns."""
    if form not in fixed.GEMM_FORMS:
        raise ValueError(f"unknown GEMM form {form!r}: expected one of {fixed.GEMM_FORMS}")
    return x.shape[0] if form == "xtg" else x.shape[1]


def longest_row(s) -> int:
    """The most non-zeros a row of CSR ``s`` holds (0 for no rows)."""
    deg = np.diff(sp.csr_array(s).indptr)
    return int(deg.max()) if deg.size else 0


class GoldenBackend:
    """The bit-exact functional model of the engines (pure numpy): the reference."""

    name = "golden"

    def __init__(self, fmt: NumberFormat = NumberFormat()):
        self.fmt = fmt
        self.kernel_runs = 0

    def spmm(self, s, x, stage: Stage, *, site: str = "") -> KernelResult:
        self.fmt.check_reduction(longest_row(s), "SpMM row")
        self.kernel_runs += 1
        return self._stage(fixed.spmm(s, x), stage)

    def gemm(self, form: str, x, w, stage: Stage, *, site: str = "") -> KernelResult:
        self.fmt.check_reduction(reduction_length(form, x), f"GEMM {form} reduction")
        self.kernel_runs += 1
        return self._stage(fixed.gemm(form, x, w), stage)

    def spmm_gemm(self, s, x, form, w, stages, *, sites=("", "")) -> PairResult:
        a = self.spmm(s, x, stages[0], site=sites[0])
        return PairResult(a, self.gemm(form, a.rows, w, stages[1], site=sites[1]))

    def gemm_spmm(self, form, x, w, s, stages, *, sites=("", "")) -> PairResult:
        t = self.gemm(form, x, w, stages[0], site=sites[0])
        return PairResult(t, self.spmm(s, t.rows, stages[1], site=sites[1]))

    def spmm_and_gemm(self, s, h, form, x, w, stages, *, sites=("", "")) -> PairResult:
        return PairResult(self.spmm(s, h, stages[0], site=sites[0]),
                          self.gemm(form, x, w, stages[1], site=sites[1]))

    def derive(self, new, source, *, rowwise: bool = False, site: str = "") -> None:
        pass  # one device: every tensor is where it is

    def report(self) -> DeviceReport:
        return DeviceReport(backend=self.name, kernel_runs=self.kernel_runs)

    def close(self) -> None:
        pass

    def _stage(self, acc: np.ndarray, stage: Stage) -> KernelResult:
        rows, stats = fixed.output_stage(acc, stage.shift, self.fmt.width, stage.relu,
                                         stage.mask)
        return KernelResult(rows, stats)
