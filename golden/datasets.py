"""Graph datasets: Planetoid pickles, a generic ``.npz`` format and a synthetic generator.

Every loader returns a :class:`Dataset` whose graph is *clean*: undirected (stored as
both directions), without duplicate edges and without self-loops (the GCN adds them
back through ``A + I``). Bad input raises :class:`DatasetError` with the offending
value or file in the message.
"""

from __future__ import annotations

import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

__all__ = [
    "PLANETOID_NAMES",
    "Dataset",
    "DatasetError",
    "default_data_dir",
    "load_dataset",
    "load_npz",
    "load_planetoid",
    "make_synthetic",
    "seeded_split",
]

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")


class DatasetError(ValueError):
    """A dataset could not be loaded: missing file, malformed content, bad name."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A node-classification graph.

    ``edge_index`` is int64 ``[2, E]`` holding every undirected edge in both
    directions, sorted, unique, without self-loops. ``features`` is a float32 CSR
    matrix ``[N, F]`` (sparse or not: CSR keeps one code path; the engines decide).
    """

    name: str
    edge_index: np.ndarray
    features: sp.csr_array
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_edges(self) -> int:
        """Directed edge count (each undirected edge counts twice)."""
        return int(self.edge_index.shape[1])

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def num_classes(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 0

    def summary(self) -> str:
        return (
            f"{self.name}: {self.num_nodes} nodes, {self.num_edges} directed edges, "
            f"{self.num_features} features ({self.features.nnz} non-zeros), "
            f"{self.num_classes} classes, split {int(self.train_mask.sum())}/"
            f"{int(self.val_mask.sum())}/{int(self.test_mask.sum())}"
        )


_CHECKOUT = Path(__file__).resolve().parent.parent


def default_data_dir() -> Path:
    """Where the Planetoid files are looked for, the one default of the CLI, the tests
    and the benchmarks: ``$MIXGCN_DATA`` when set; else, in a source checkout, the
    folder ``shared/data/planetoid`` beside the checkout; else
    ``$XDG_DATA_HOME/mixgcn/planetoid`` (``~/.local/share/mixgcn/planetoid``)."""
    env = os.environ.get("MIXGCN_DATA")
    if env:
        return Path(env)
    if (_CHECKOUT / "pyproject.toml").is_file():
        return _CHECKOUT.parent / "shared" / "data" / "planetoid"
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "mixgcn" / "planetoid"


def load_dataset(spec: str, data_dir: str | os.PathLike | None = None, seed: int = 0) -> Dataset:
    """Load a dataset by name: a Planetoid name, ``synthetic[:key=value,...]`` or a path
    to an ``.npz`` file. ``seed`` only drives splits that the data does not fix."""
    if not isinstance(spec, str) or not spec:
        raise DatasetError(f"dataset must be a non-empty name, got {spec!r}")
    if spec.lower() in PLANETOID_NAMES:
        return load_planetoid(spec.lower(), default_data_dir() if data_dir is None else data_dir)
    if spec == "synthetic" or spec.startswith("synthetic:"):
        return make_synthetic(**_parse_synthetic_spec(spec))
    if spec.endswith(".npz"):
        return load_npz(spec, seed=seed)
    raise DatasetError(
        f"unknown dataset {spec!r}: expected one of {', '.join(PLANETOID_NAMES)}, "
        "'synthetic[:nodes=N,degree=D,...]' or a path ending in .npz"
    )


# --------------------------------------------------------------------------- cleaning


def clean_edges(edges: np.ndarray, num_nodes: int) -> np.ndarray:
    """Symmetrise, drop self-loops and duplicates; return sorted int64 ``[2, E]``."""
    src, dst = np.asarray(edges[0], np.int64), np.asarray(edges[1], np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    both = np.concatenate([src * num_nodes + dst, dst * num_nodes + src])
    key = np.unique(both)
    return np.stack([key // num_nodes, key % num_nodes]).astype(np.int64)


# ------------------------------------------------------------------------- Planetoid


class _PlanetoidUnpickler(pickle.Unpickler):
    """Loads the Python 2 Planetoid pickles, allowing only the classes they hold.

    Maps module paths that SciPy and NumPy have retired (``scipy.sparse.csr``,
    ``numpy.core``) to their current homes, and refuses anything else, since a pickle
    can otherwise run arbitrary code.
    """

    _ALLOWED: ClassVar = {
        ("scipy.sparse", "csr_matrix"),
        ("collections", "defaultdict"),
        ("builtins", "list"),
        ("builtins", "dict"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),  # how protocol-2 pickles from Python 3 carry bytes
    }

    def find_class(self, module: str, name: str):
        if module.startswith("scipy.sparse"):
            module = "scipy.sparse"
        elif module.startswith("numpy.core"):
            module = "numpy._core" + module[len("numpy.core") :]
        elif module == "__builtin__":
            module = "builtins"
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")
        return super().find_class(module, name)


def _planetoid_file(data_dir: Path, name: str, part: str) -> Path:
    path = data_dir / f"ind.{name}.{part}"
    if not path.is_file():
        raise DatasetError(f"{name}: missing file {path}")
    return path


def _unpickle(path: Path):
    try:
        with open(path, "rb") as f:
            return _PlanetoidUnpickler(f, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
        raise DatasetError(f"cannot read {path}: {e}") from e


def load_planetoid(name: str, data_dir: str | os.PathLike) -> Dataset:
    """Load Cora, CiteSeer or PubMed from the ``ind.<name>.*`` files of Planetoid.

    The standard recipe (Kipf & Welling): stack ``allx`` and ``tx``, put the test rows
    back in graph order (``test.index`` is unsorted), pad CiteSeer's missing test ids
    with zero rows that belong to no split; train = the first ``len(y)`` ids, val = the
    next 500, test = the sorted test ids.
    """
    if name not in PLANETOID_NAMES:
        raise DatasetError(f"unknown Planetoid dataset {name!r}: expected one of {PLANETOID_NAMES}")
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DatasetError(
            f"{name}: data directory {data_dir} does not exist "
            "(pass --data-dir or set MIXGCN_DATA)"
        )
    parts = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
    paths = {p: _planetoid_file(data_dir, name, p) for p in parts}
    y = _unpickle(paths["y"])
    tx = sp.csr_array(_unpickle(paths["tx"]))
    ty = np.asarray(_unpickle(paths["ty"]))
    allx = sp.csr_array(_unpickle(paths["allx"]))
    ally = np.asarray(_unpickle(paths["ally"]))
    graph = _unpickle(paths["graph"])
    try:
        test_idx = np.array(paths["test.index"].read_text().split(), dtype=np.int64)
    except ValueError as e:
        raise DatasetError(f"cannot read {paths['test.index']}: {e}") from e
    test_sorted = np.sort(test_idx)

    if name == "citeseer":
        # Some test ids are isolated nodes absent from tx/ty: pad with zero rows.
        full = np.arange(test_sorted[0], test_sorted[-1] + 1)
        tx_ext = sp.lil_array((len(full), tx.shape[1]), dtype=tx.dtype)
        tx_ext[test_sorted - test_sorted[0], :] = tx
        tx = sp.csr_array(tx_ext)
        ty_ext = np.zeros((len(full), ty.shape[1]), dtype=ty.dtype)
        ty_ext[test_sorted - test_sorted[0], :] = ty
        ty = ty_ext

    features = sp.vstack([allx, tx]).tolil()
    features[test_idx, :] = features[test_sorted, :]
    labels_onehot = np.vstack([ally, ty])
    labels_onehot[test_idx, :] = labels_onehot[test_sorted, :]
    labels = labels_onehot.argmax(axis=1).astype(np.int64)
    n = labels.shape[0]

    src, dst = [], []
    for node, neighbours in graph.items():
        src.extend([node] * len(neighbours))
        dst.extend(neighbours)
    edges = np.array([src, dst], dtype=np.int64)
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        bad = int(edges.max() if edges.max() >= n else edges.min())
        raise DatasetError(f"{name}: graph names node {bad}, outside 0..{n - 1}")

    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][: len(y)] = True
    masks[1][len(y) : len(y) + 500] = True
    masks[2][test_sorted] = True
    padded = np.setdiff1d(np.arange(test_sorted[0], test_sorted[-1] + 1), test_sorted)
    if name == "citeseer":
        for m in masks:  # zero rows standing in for absent nodes: in no split
            m[padded] = False
    return Dataset(
        name=name,
        edge_index=clean_edges(edges, n),
        features=sp.csr_array(features, dtype=np.float32),
        labels=labels,
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
    )


# ------------------------------------------------------------------------------ npz


def seeded_split(
    labels: np.ndarray, seed: int, per_class: int = 20, num_val: int = 500, num_test: int = 1000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Planetoid-style split: ``per_class`` training nodes of each class (at most a third
    of the class, so small graphs still split), then ``num_val`` validation and
    ``num_test`` test nodes drawn from the rest (fewer when the graph is small: the rest
    is shared half and half)."""
    rng = np.random.default_rng(seed)
    n = labels.shape[0]
    train = np.zeros(n, dtype=bool)
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        train[members[: min(per_class, max(1, len(members) // 3))]] = True
    rest = rng.permutation(np.flatnonzero(~train))
    nv = min(num_val, len(rest) // 2)
    nt = min(num_test, len(rest) - nv)
    val = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    val[rest[:nv]] = True
    test[rest[nv : nv + nt]] = True
    return train, val, test


def _require(cond: bool, path: Path, message: str) -> None:
    if not cond:
        raise DatasetError(f"{path}: {message}")


def load_npz(path: str | os.PathLike, seed: int = 0) -> Dataset:
    """Load the generic ``.npz`` format (PyG-style names, see README "Data formats").

    Edges are read as undirected; duplicates and self-loops are dropped.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist")
    try:
        z = np.load(path, allow_pickle=False)
        arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise DatasetError(f"cannot read {path} as .npz: {e}") from e

    for key in ("edge_index", "y"):
        _require(key in arrays, path, f"missing array {key!r} (has {sorted(arrays)})")
    y = arrays["y"]
    _require(y.ndim == 1, path, f"'y' must be 1-D [N], got shape {y.shape}")
    _require(np.issubdtype(y.dtype, np.integer), path, f"'y' must be integer, got {y.dtype}")
    n = int(y.shape[0])
    _require(n > 0, path, "empty graph: 'y' has no nodes")
    if y.min() < 0:
        raise DatasetError(f"{path}: label {int(y.min())} is negative")
    if y.max() >= n:
        raise DatasetError(f"{path}: label {int(y.max())} is out of range: {n} nodes "
                           f"cannot hold more than {n} classes (labels are 0..C-1)")

    x = _npz_features(arrays, path)
    _require(
        x.shape[0] == n, path, f"features have {x.shape[0]} rows but 'y' has {n} labels"
    )
    _require(x.shape[1] > 0, path, "features have zero columns")
    if not np.all(np.isfinite(x.data)):
        bad = x.data[~np.isfinite(x.data)][0]
        raise DatasetError(f"{path}: features contain a non-finite value ({bad})")

    ei = arrays["edge_index"]
    _require(
        ei.ndim == 2 and ei.shape[0] == 2, path, f"'edge_index' must be [2, E], got {ei.shape}"
    )
    _require(
        np.issubdtype(ei.dtype, np.integer),
        path,
        f"'edge_index' must be integer, got {ei.dtype}",
    )
    if ei.size:
        lo, hi = int(ei.min()), int(ei.max())
        _require(lo >= 0, path, f"edge_index holds negative node id {lo}")
        _require(hi < n, path, f"edge_index names node {hi}, outside 0..{n - 1}")

    masks = []
    for key in ("train_mask", "val_mask", "test_mask"):
        if key in arrays:
            m = arrays[key]
            _require(m.dtype == bool, path, f"{key!r} must be bool, got {m.dtype}")
            _require(m.shape == (n,), path, f"{key!r} must have shape ({n},), got {m.shape}")
            masks.append(m)
    if len(masks) not in (0, 3):
        raise DatasetError(f"{path}: give all three of train_mask/val_mask/test_mask or none")
    if not masks:
        masks = list(seeded_split(y.astype(np.int64), seed))
    _require(bool(masks[0].any()), path, "train_mask selects no node")
    return Dataset(
        name=path.stem,
        edge_index=clean_edges(ei, n),
        features=x,
        labels=y.astype(np.int64),
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
    )


def _npz_features(arrays: dict, path: Path) -> sp.csr_array:
    if "x" in arrays:
        x = arrays["x"]
        _require(x.ndim == 2, path, f"'x' must be 2-D [N, F], got shape {x.shape}")
        _require(
            np.issubdtype(x.dtype, np.number), path, f"'x' must be numeric, got {x.dtype}"
        )
        return sp.csr_array(x.astype(np.float32))
    csr_keys = ("x_indptr", "x_indices", "x_data", "x_shape")
    missing = [k for k in csr_keys if k not in arrays]
    _require(not missing, path, f"no 'x' and no CSR features: missing {missing}")
    shape = tuple(int(s) for s in arrays["x_shape"])
    _require(len(shape) == 2, path, f"'x_shape' must hold 2 values, got {shape}")
    indptr, indices, data = arrays["x_indptr"], arrays["x_indices"], arrays["x_data"]
    _require(indptr.shape == (shape[0] + 1,), path,
             f"'x_indptr' must have {shape[0] + 1} entries, got {indptr.shape}")
    _require(indices.shape == data.shape and indices.ndim == 1, path,
             f"'x_indices' {indices.shape} and 'x_data' {data.shape} must be equal 1-D")
    _require(int(indptr[0]) == 0 and int(indptr[-1]) == len(indices)
             and bool(np.all(np.diff(indptr) >= 0)), path,
             "'x_indptr' must start at 0, never decrease and end at len(x_indices)")
    if indices.size:
        _require(int(indices.min()) >= 0 and int(indices.max()) < shape[1], path,
                 f"'x_indices' holds column {int(indices.max())} outside 0..{shape[1] - 1}")
    return sp.csr_array((data.astype(np.float32), indices, indptr), shape=shape)


# ------------------------------------------------------------------------ synthetic

_SYNTHETIC_DEFAULTS = dict(
    nodes=2000, degree=8.0, features=500, classes=7, homophily=0.8, seed=0
)


def _parse_synthetic_spec(spec: str) -> dict:
    params = dict(_SYNTHETIC_DEFAULTS)
    if ":" in spec:
        for item in spec.split(":", 1)[1].split(","):
            m = re.fullmatch(r"\s*(\w+)\s*=\s*([-+.\w]+)\s*", item)
            if not m or m.group(1) not in params:
                raise DatasetError(
                    f"bad synthetic option {item!r}: expected key=value with key in "
                    f"{sorted(params)}"
                )
            key, value = m.groups()
            try:
                params[key] = type(_SYNTHETIC_DEFAULTS[key])(value)
            except ValueError:
                raise DatasetError(f"bad synthetic option {key}={value!r}") from None
    return params


def make_synthetic(
    nodes: int = 2000,
    degree: float = 8.0,
    features: int = 500,
    classes: int = 7,
    homophily: float = 0.8,
    seed: int = 0,
) -> Dataset:
    """A deterministic planted-class graph a GCN really learns.

    - Degree-corrected stochastic block model: node weights follow a power law
      (Pareto, exponent 2.5), so degrees are skewed as in real graphs; a fraction
      ``homophily`` of edges joins nodes of the same class.
    - Sparse binary bag-of-words features, class-correlated: each class owns a block of
      "topic" words; a node draws about 2 % of the vocabulary, half from its topic.
      Features alone are noisy; neighbours average the noise out, which is the point.
    - ``degree`` is the mean undirected degree; sizes range from 100 nodes to millions
      of edges (generation is vectorised).
    """
    if not (isinstance(nodes, int) and nodes >= 10):
        raise DatasetError(f"synthetic nodes must be an integer >= 10, got {nodes!r}")
    if not (degree > 0):
        raise DatasetError(f"synthetic degree must be > 0, got {degree!r}")
    if not (isinstance(classes, int) and 2 <= classes <= nodes // 5):
        raise DatasetError(f"synthetic classes must be in 2..nodes/5, got {classes!r}")
    if not (isinstance(features, int) and features >= 2 * classes):
        raise DatasetError(f"synthetic features must be >= 2*classes, got {features!r}")
    if not (0.0 <= homophily <= 1.0):
        raise DatasetError(f"synthetic homophily must be in [0, 1], got {homophily!r}")

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=nodes).astype(np.int64)
    theta = rng.pareto(1.5, size=nodes) + 1.0
    m = round(nodes * degree / 2)

    src = rng.choice(nodes, size=m, p=theta / theta.sum())
    intra = rng.random(m) < homophily
    dst = rng.choice(nodes, size=m, p=theta / theta.sum())
    for c in range(classes):
        members = np.flatnonzero(labels == c)
        sel = intra & (labels[src] == c)
        w = theta[members]
        dst[sel] = rng.choice(members, size=int(sel.sum()), p=w / w.sum())
    edges = clean_edges(np.stack([src, dst]), nodes)

    words_per_node = max(2, features // 50)
    topic = features // classes
    own = rng.integers(0, topic, size=(nodes, words_per_node // 2)) + labels[:, None] * topic
    noise = rng.integers(0, features, size=(nodes, words_per_node - words_per_node // 2))
    cols = np.concatenate([own, noise], axis=1)
    rows = np.repeat(np.arange(nodes), cols.shape[1])
    x = sp.csr_array(
        (np.ones(rows.size, np.float32), (rows, cols.ravel())), shape=(nodes, features)
    )
    x.data[:] = 1.0  # duplicate draws were summed: keep the features binary
    train, val, test = seeded_split(labels, seed)
    return Dataset(
        name=f"synthetic-n{nodes}-d{degree:g}-f{features}-c{classes}-s{seed}",
        edge_index=edges,
        features=x,
        labels=labels,
        train_mask=train,
        val_mask=val,
        test_mask=test,
    )
