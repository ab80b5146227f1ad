"""Design-space exploration: the chip that trains a dataset fastest within an FPGA.

Every configuration of a small grid — the sparse engine's lanes (the dense engine's
array is lanes × lanes, as the exchange port requires) and edge pipelines, the feature
buffer's rows, partial sums for column windows or none — is first screened on the
part's hard resources (:mod:`mixgcn.gen.resources`: multipliers and block RAM, exactly
as the chip is built; at most :data:`DSP_FILL` of the multipliers, to leave room to
route), then checked to hold the dataset (the driver's own layout,
:func:`~mixgcn.host.chip_driver.plan_training`), then trained for two epochs on the
performance model (:class:`~mixgcn.host.perf_model.ModelDevice`, docs/model.md). The
fastest second epoch wins; its whole-chip utilisation is the run's useful
multiply-accumulates over its cycles times the chip's multipliers.

Everything the search does not vary is the ``base`` preset's (by default ``ecp5``:
16-bit data, 48-bit accumulators, the FIFOs and memory map). LUTs are not screened:
the board flow (``mixgcn board --chip FILE.json``) reports them from the tools.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from mixgcn.gen.config import (
    CHIP_PRESETS,
    MEMORY_PROFILES,
    ChipConfig,
    ConfigError,
    MemoryProfile,
)
from mixgcn.gen.resources import Part, chip_block_rams, multipliers

__all__ = ["DSP_FILL", "GRID", "Candidate", "candidates", "check_dsp_fill", "evaluate",
           "explore", "multiplier_budget"]

# the grid: lanes (= the DCE's rows and columns), edge pipelines, feature-buffer rows,
# partial-sum rows
GRID = dict(lanes=(2, 4, 8, 16), edges=(1, 2, 3, 4, 6, 8),
            max_nodes=(1024, 2048, 4096, 8192), partial_rows=(0, 1024))

# the share of the part's multipliers a chip may take: room for place and route. The
# multipliers sit in a few rows of the die, and a chip using most of them spreads its
# datapath across it. On the ECP5-85F (docs/boards.md): 8 lanes x 8 edges (128 of 156,
# 82 %) did not finish routing in two builds of over an hour; 8 lanes x 4 edges (96,
# 62 %) routed in 58 minutes. 0.7 lies between; nothing at 70-82 % was built.
DSP_FILL = 0.7


def check_dsp_fill(dsp_fill) -> None:
    """Refuse a share of the multipliers that is not in (0, 1]."""
    if isinstance(dsp_fill, bool) or not isinstance(dsp_fill, int | float) \
            or not 0 < dsp_fill <= 1:
        raise ValueError(f"the share of the multipliers a chip may take must be in (0, 1], "
                         f"got {dsp_fill!r}")


def multiplier_budget(part: Part, dsp_fill: float = DSP_FILL) -> int:
    """The most multipliers a candidate may take of ``part``: ``dsp_fill`` of them."""
    check_dsp_fill(dsp_fill)
    return int(dsp_fill * part.dsp)


@dataclass
class Candidate:
    """A configuration, what it takes of the part and, once evaluated, how it trains."""

    config: ChipConfig
    multipliers: int
    bram: int
    epoch_cycles: int | None = None  # the second epoch's, on the model
    utilisation: float | None = None
    refused: str | None = None  # why it cannot train the dataset

    def label(self) -> str:
        s = self.config.sae
        windows = f", {s.partial_rows} partial" if s.partial_rows else ""
        return f"{s.lanes} lanes x {s.edges} edges, {s.max_nodes} rows{windows}"

    def to_dict(self) -> dict:
        return dict(label=self.label(), multipliers=self.multipliers, bram=self.bram,
                    epoch_cycles=self.epoch_cycles, utilisation=self.utilisation,
                    refused=self.refused, config=self.config.to_dict())


def candidates(part: Part, base: ChipConfig = CHIP_PRESETS["ecp5"],
               dsp_fill: float = DSP_FILL) -> list[Candidate]:
    """Every configuration of :data:`GRID` that the generator accepts and that fits
    ``part``'s block RAM and ``dsp_fill`` of its multipliers."""
    budget = multiplier_budget(part, dsp_fill)
    out = []
    for lanes, edges, rows, partial in itertools.product(*GRID.values()):
        if partial > rows:
            continue
        try:
            c = dataclasses.replace(
                base, sae=dataclasses.replace(base.sae, lanes=lanes, edges=edges,
                                              max_nodes=rows, partial_rows=partial),
                dce=dataclasses.replace(base.dce, rows=lanes, cols=lanes))
        except ConfigError:
            continue
        cand = Candidate(c, multipliers(c), chip_block_rams(c))
        if cand.multipliers <= budget and cand.bram <= part.bram:
            out.append(cand)
    return out


def evaluate(cand: Candidate, dataset, memory: MemoryProfile = MEMORY_PROFILES["ideal"],
             epochs: int = 2) -> Candidate:
    """Train ``dataset`` on ``cand`` on the performance model: its last epoch's cycles
    and the run's utilisation (or why the chip cannot hold the dataset)."""
    from mixgcn.golden.gcn import GCNConfig
    from mixgcn.host.chip_driver import ChipBackend, plan_training
    from mixgcn.host.perf_model import ModelDevice, WorkCounter
    from mixgcn.host.train import train

    gcn = GCNConfig(epochs=epochs)
    try:
        plan_training(dataset, gcn, cand.config)
    except ValueError as e:
        cand.refused = str(e)
        return cand
    work = WorkCounter(ChipBackend(ModelDevice(cand.config, memory=memory)))
    r = train(dataset, gcn, precision="fixed16", backend=work)
    cand.epoch_cycles = r["epoch_cycles"][-1]
    cand.utilisation = work.macs / (r["cycles"] * cand.multipliers)
    return cand


def explore(dataset, part: Part, memory: MemoryProfile = MEMORY_PROFILES["ideal"],
            base: ChipConfig = CHIP_PRESETS["ecp5"], dsp_fill: float = DSP_FILL,
            progress: Callable[[str], None] | None = None) -> list[Candidate]:
    """Every candidate for ``part`` evaluated on ``dataset``, fastest first (those that
    cannot hold it last)."""
    cands = candidates(part, base, dsp_fill)
    if not cands:
        raise ValueError(f"no configuration of the grid fits {part.name} "
                         f"({dsp_fill:.0%} of its {part.dsp} multipliers, "
                         f"{part.bram} block RAMs)")
    # a buffer holding every row any SpMM gathers from needs no column windows, and a
    # larger one changes nothing: only the smallest such is tried, without partial sums
    need = max(dataset.num_nodes, dataset.num_features)
    enough = min((r for r in GRID["max_nodes"] if r >= need), default=None)
    cands = [c for c in cands
             if c.config.sae.max_nodes < need
             or (c.config.sae.max_nodes == enough and not c.config.sae.partial_rows)]
    t0 = time.perf_counter()
    for i, cand in enumerate(cands, 1):
        evaluate(cand, dataset, memory)
        if progress:
            what = (f"{cand.epoch_cycles:,} cycles an epoch" if cand.refused is None
                    else "cannot hold the dataset")
            progress(f"[{i}/{len(cands)}] {cand.label()}: {what} "
                     f"({time.perf_counter() - t0:.0f} s)")
    return sorted(cands, key=lambda c: (c.refused is not None, c.epoch_cycles or 0,
                                        c.multipliers, c.bram))
