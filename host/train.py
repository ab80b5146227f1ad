"""The training driver: a GCN trained on one backend, with metrics for the JSON report.

A library first (:func:`train`); the CLI in :mod:`mixgcn.host.cli` is a thin layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from mixgcn.golden.backend import Backend, GoldenBackend
from mixgcn.golden.datasets import Dataset
from mixgcn.golden.gcn import GCN, Adam, FloatOps, GCNConfig, accuracy, softmax_cross_entropy
from mixgcn.golden.graph import normalized_adjacency
from mixgcn.golden.reorder import bandwidth, node_order
from mixgcn.golden.reorder import reorder as reordered
from mixgcn.host.comm import Communicator
from mixgcn.host.precision import FixedOps
from mixgcn.host.sharded import LINK_GBPS, ShardedBackend
from mixgcn.host.sharding import PARALLELISMS, PARTITIONERS, NodePartition, check_parts

__all__ = ["EXCHANGES", "PRECISIONS", "Parallel", "normalize_features", "train"]

PRECISIONS = ("float32", "float64", "fixed16")


def normalize_features(x: sp.csr_array) -> sp.csr_array:
    """Row-normalise features to sum 1 (Kipf & Welling's preprocessing); empty rows stay 0."""
    s = np.asarray(x.sum(axis=1)).ravel()
    inv = np.divide(1.0, s, out=np.zeros_like(s, dtype=np.float64), where=s != 0)
    return sp.csr_array(sp.diags_array(inv) @ x, dtype=np.float32)


EXCHANGES = ("host", "fabric")


@dataclass(frozen=True)
class Parallel:
    """How a run shares its kernels among P chips (docs/parallelism.md)."""

    chips: int
    parallelism: str = "mop"
    partitioner: str = "contiguous"
    link_gbps: float = LINK_GBPS
    exchange: str = "host"  # or "fabric": the chips' exchange fabric carries it
    fabric: str = "crossbar"  # with exchange="fabric": its kind (FABRIC_PRESETS)

    def __post_init__(self):
        check_parts(self.chips, self.chips, "chips")
        if self.exchange not in EXCHANGES:
            raise ValueError(f"unknown exchange {self.exchange!r}: expected one of "
                             f"{EXCHANGES}")
        if self.exchange == "fabric":
            if self.parallelism != "mop":
                raise ValueError("the exchange fabric carries Mixture of Parallelism's "
                                 f"all-to-all, not parallelism {self.parallelism!r}")
            if self.partitioner not in ("contiguous", "cyclic"):
                raise ValueError("the exchange fabric interleaves rows (node r on chip r "
                                 f"mod P): partitioner {self.partitioner!r} does not apply")
            object.__setattr__(self, "partitioner", "cyclic")
        if self.parallelism not in PARALLELISMS:
            raise ValueError(f"unknown parallelism {self.parallelism!r}: expected one of "
                             f"{PARALLELISMS}")
        if self.partitioner not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {self.partitioner!r}: expected one of "
                             f"{PARTITIONERS}")

    def check(self, dataset: Dataset) -> None:
        """Refuse more chips than the nodes or the input features they share."""
        check_parts(self.chips, dataset.num_nodes, f"nodes ({dataset.name})")
        check_parts(self.chips, dataset.num_features, f"input features ({dataset.name})")


def make_ops(precision: str, backend: Backend | None = None):
    """The arithmetic of a run: float kernels, or fixed-point kernels on ``backend``
    (default: the golden functional model)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: expected one of {PRECISIONS}")
    if backend is not None and not isinstance(backend, Backend):
        raise TypeError(f"expected a Backend, got {backend!r}")
    if precision.startswith("float"):
        if backend is not None and backend.name != "golden":
            raise ValueError(f"backend {backend.name!r} computes in fixed point: "
                             "use --precision fixed16")
        return FloatOps(np.dtype(precision))
    return FixedOps(backend if backend is not None else GoldenBackend())


def train(
    dataset: Dataset,
    config: GCNConfig = GCNConfig(),
    precision: str = "float32",
    backend: Backend | None = None,
    progress: Callable[[dict], None] | None = None,
    reorder: str = "none",
    parallel: Parallel | None = None,
) -> dict:
    """Train a GCN on ``dataset``; return the run's metrics (the CLI's JSON keys).

    Full-batch: every epoch is one forward and one backward over the whole graph.
    The random stream (initialisation, then dropout masks) depends only on the seed and
    the shapes, so every precision and backend sees the same masks. Accuracies come
    from a final forward pass without dropout. ``progress`` gets a dict per epoch
    (``epoch``, ``epochs``, ``loss``, ``train_accuracy``, ``seconds``, and ``cycles``,
    the device's cycles so far, when it counts them). ``backend`` (fixed point only;
    default golden) stays open: its owner closes it.
    ``reorder`` renumbers the nodes first (:mod:`mixgcn.golden.reorder`): the same
    model on the same graph, rows in another order (which changes the dropout masks'
    assignment to nodes, so the weights differ from an unreordered run).
    ``parallel``: run on P chips — ``backend`` is then a
    :class:`~mixgcn.host.comm.Communicator` of P chips, which the kernels are shared
    among (:class:`~mixgcn.host.sharded.ShardedBackend`); the weights are the same
    whatever P and the parallelism.
    """
    dataset = reordered(dataset, node_order(dataset, reorder))
    a_hat = normalized_adjacency(dataset.edge_index, dataset.num_nodes)
    if parallel is not None:
        if not isinstance(backend, Communicator):
            raise TypeError(f"a run on {parallel.chips} chips needs a Communicator, got "
                            f"{backend!r}")
        if precision != "fixed16":
            raise ValueError(f"chips run fixed-point kernels: precision {precision!r} "
                             "cannot be shared among chips (use fixed16)")
        if backend.size != parallel.chips:
            raise ValueError(f"{backend.size} chips for a run on {parallel.chips}")
        parallel.check(dataset)
        fabric = getattr(backend, "fabric", None)
        if parallel.exchange == "fabric" and fabric is None:
            raise ValueError("--exchange fabric needs the chips of one simulated system "
                             "(--backend rtl in one process)")
        backend = ShardedBackend(backend, NodePartition.build(a_hat, parallel.chips,
                                                              parallel.partitioner),
                                 parallel.parallelism, link_gbps=parallel.link_gbps,
                                 fabric=fabric if parallel.exchange == "fabric" else None)
    ops = make_ops(precision, backend)
    t0 = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    master = np.float64 if precision == "float64" else np.float32
    model = GCN(config, dataset.num_features, dataset.num_classes, rng, master)
    adj = ops.adjacency(a_hat)
    x = normalize_features(dataset.features).astype(master)
    opt = Adam(config.lr)
    decay = [config.weight_decay] + [0.0] * (config.layers - 1)
    labels, train_mask = dataset.labels, dataset.train_mask

    def device_counts():
        """The device's cycles so far (None if it does not count them) and, on several
        chips, the bytes moved between them so far."""
        if not isinstance(ops, FixedOps):
            return None, None
        r = ops.backend.report()
        return r.cycles, r.parallel

    epoch_seconds, epoch_cycles, epoch_bytes = [], [], []
    for epoch in range(config.epochs):
        cycles_before, bytes_before = device_counts()
        te = time.perf_counter()
        logits, cache = model.forward(ops, adj, x, rng)
        logits = np.asarray(logits, dtype=master)
        loss, grad = softmax_cross_entropy(logits, labels, train_mask)
        grads = model.backward(ops, adj, cache, grad)
        opt.step(model.weights, grads, decay)
        epoch_seconds.append(time.perf_counter() - te)
        cycles, moved = device_counts()
        if cycles is not None:
            epoch_cycles.append(cycles - cycles_before)
        if moved is not None:  # on several chips: what this epoch moved between them
            epoch_bytes.append(dict(
                bytes_moved=moved["bytes_moved"] - bytes_before["bytes_moved"],
                formula_bytes=moved["formula_bytes"] - bytes_before["formula_bytes"],
                bytes_per_op={k: v - bytes_before["bytes_per_op"].get(k, 0)
                              for k, v in moved["bytes_per_op"].items()},
                bytes_per_chip=[a - b for a, b in zip(moved["bytes_per_chip"],
                                                      bytes_before["bytes_per_chip"],
                                                      strict=True)]))
        if progress is not None:
            progress(dict(epoch=epoch + 1, epochs=config.epochs, loss=loss,
                          train_accuracy=accuracy(logits, labels, train_mask),
                          seconds=epoch_seconds[-1], cycles=cycles))

    logits, _ = model.forward(ops, adj, x, None)
    logits = np.asarray(logits, dtype=master)
    result = dict(
        dataset=dataset.name,
        nodes=dataset.num_nodes,
        edges=dataset.num_edges,
        features=dataset.num_features,
        classes=dataset.num_classes,
        backend=ops.backend.name if isinstance(ops, FixedOps) else "golden",
        precision=precision,
        epochs=config.epochs,
        seed=config.seed,
        layers=config.layers,
        hidden=config.hidden,
        train_accuracy=accuracy(logits, labels, dataset.train_mask),
        val_accuracy=accuracy(logits, labels, dataset.val_mask),
        test_accuracy=accuracy(logits, labels, dataset.test_mask),
        final_loss=softmax_cross_entropy(logits, labels, train_mask)[0],
        wall_seconds=time.perf_counter() - t0,
        epoch_seconds_median=float(np.median(epoch_seconds)) if epoch_seconds else 0.0,
        weights_sha256=model.weights_sha256(),
        reorder=reorder,
        adjacency_bandwidth=bandwidth(dataset),
    )
    if isinstance(ops, FixedOps):
        result["fixed_saturated"] = ops.saturated
        result["fixed_operations"] = ops.operations
        result.update(ops.backend.report().to_json())
        if epoch_cycles:
            result["epoch_cycles"] = epoch_cycles
        if epoch_bytes:
            result["epoch_bytes_moved"] = [e["bytes_moved"] for e in epoch_bytes]
            result["epoch_traffic"] = epoch_bytes
    return result
