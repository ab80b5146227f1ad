"""Datasets: Cora's published counts, the Planetoid recipe, the npz format, synthetic."""

from __future__ import annotations

import os
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.golden.datasets import (
    DatasetError,
    load_dataset,
    load_npz,
    load_planetoid,
    make_synthetic,
    seeded_split,
)

# ---------------------------------------------------------------------------- Cora


def test_cora_counts(cora):
    """The counts the Planetoid Cora files are known to hold (2708 nodes, 5278 edges, ...)."""
    assert cora.num_nodes == 2708
    assert cora.num_features == 1433
    assert cora.features.nnz == 49216
    assert set(np.unique(cora.features.data)) == {1.0}
    assert cora.num_classes == 7
    assert cora.num_edges == 10556  # 5278 undirected edges, both directions
    src, dst = cora.edge_index
    assert not np.any(src == dst)
    assert np.bincount(src, minlength=2708).min() > 0  # no isolated node
    assert np.bincount(cora.labels).tolist() == [351, 217, 418, 818, 426, 298, 180]
    assert np.flatnonzero(cora.train_mask).tolist() == list(range(140))
    assert np.flatnonzero(cora.val_mask).tolist() == list(range(140, 640))
    assert cora.test_mask.sum() == 1000
    assert not (cora.train_mask & cora.test_mask).any()


def test_cora_test_rows_follow_test_index(cora, cora_dir):
    """Row k of tx belongs to node test.index[k] (the file is not sorted)."""
    with open(cora_dir / "ind.cora.tx", "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # scipy.sparse.csr path
        tx = sp.csr_array(pickle.load(f, encoding="latin1"))
    order = np.loadtxt(cora_dir / "ind.cora.test.index", dtype=np.int64)
    assert not np.all(np.diff(order) > 0)
    assert (cora.features[order].toarray() == tx.toarray()).all()
    assert np.array_equal(np.sort(order), np.flatnonzero(cora.test_mask))


def test_cora_graph_is_symmetric(cora):
    n = cora.num_nodes
    a = sp.csr_array((np.ones(cora.num_edges), tuple(cora.edge_index)), shape=(n, n))
    assert (a != a.T).nnz == 0
    assert a.max() == 1.0


# ------------------------------------------------------------ a fake Planetoid set


def _write_planetoid(d, name, n_train, n_other, test_ids, feats=6, classes=3, drop=()):
    """Write Planetoid-format pickles of a tiny graph: node i has feature i % feats."""
    rng = np.random.default_rng(1)
    n_all = n_train + n_other

    def onehot(ids):
        y = np.zeros((len(ids), classes))
        y[np.arange(len(ids)), np.asarray(ids) % classes] = 1
        return y

    def feat(ids):
        m = sp.lil_matrix((len(ids), feats))
        for r, i in enumerate(ids):
            m[r, i % feats] = 1
        return sp.csr_matrix(m)

    n_nodes = n_all + len(test_ids)
    graph = {i: [int(j) for j in rng.integers(0, n_nodes, 3)] for i in range(n_all)}
    parts = dict(
        x=feat(range(n_train)), y=onehot(range(n_train)),
        allx=feat(range(n_all)), ally=onehot(range(n_all)),
        tx=feat(test_ids), ty=onehot(test_ids), graph=graph,
    )
    for part, obj in parts.items():
        if part not in drop:
            with open(d / f"ind.{name}.{part}", "wb") as f:
                pickle.dump(obj, f, protocol=2)
    if "test.index" not in drop:
        (d / f"ind.{name}.test.index").write_text("\n".join(map(str, test_ids)) + "\n")


def test_planetoid_recipe_reorders_test_rows(tmp_path):
    test_ids = [13, 10, 12, 11]  # unsorted, as in the real files
    _write_planetoid(tmp_path, "cora", 4, 6, test_ids)
    ds = load_planetoid("cora", tmp_path)
    assert ds.num_nodes == 14
    for node in range(14):  # every node ended up with its own feature and label
        assert ds.features[[node]].toarray().argmax() == node % 6
        assert ds.labels[node] == node % 3
    assert np.flatnonzero(ds.test_mask).tolist() == [10, 11, 12, 13]
    assert np.flatnonzero(ds.train_mask).tolist() == [0, 1, 2, 3]


def test_citeseer_missing_test_ids_are_padded_and_unsplit(tmp_path):
    test_ids = [13, 10, 15]  # ids 11, 12 and 14 are missing, as in CiteSeer
    _write_planetoid(tmp_path, "citeseer", 4, 6, test_ids)
    ds = load_planetoid("citeseer", tmp_path)
    assert ds.num_nodes == 16
    for missing in (11, 12, 14):
        assert ds.features[[missing]].nnz == 0
        assert not (ds.train_mask[missing] or ds.val_mask[missing] or ds.test_mask[missing])
    assert np.flatnonzero(ds.test_mask).tolist() == [10, 13, 15]


def test_planetoid_missing_file_is_named(tmp_path):
    _write_planetoid(tmp_path, "pubmed", 4, 6, [10, 11], drop=("allx",))
    with pytest.raises(DatasetError, match=r"missing file .*ind\.pubmed\.allx"):
        load_planetoid("pubmed", tmp_path)


def test_planetoid_missing_directory(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset("cora", tmp_path / "nowhere")


def test_planetoid_refuses_foreign_pickles(tmp_path):
    _write_planetoid(tmp_path, "cora", 4, 6, [10, 11])
    with open(tmp_path / "ind.cora.graph", "wb") as f:
        pickle.dump(os.getcwd, f)  # a function: nothing Planetoid files hold
    with pytest.raises(DatasetError, match="cannot read"):
        load_planetoid("cora", tmp_path)


def test_unknown_dataset_is_named():
    with pytest.raises(DatasetError, match="'reddit'"):
        load_dataset("reddit")


# ------------------------------------------------------------------------------ npz


def _graph(n=6):
    return dict(
        edge_index=np.array([[0, 1, 2, 3, 3, 4], [1, 2, 3, 4, 4, 4]]),
        x=np.eye(n, 4, dtype=np.float32),
        y=np.array([0, 1, 0, 1, 0, 1]),
    )


def _save(tmp_path, **arrays):
    p = tmp_path / "g.npz"
    np.savez(p, **arrays)
    return p


def test_npz_dense_cleans_edges_and_splits(tmp_path):
    ds = load_dataset(str(_save(tmp_path, **_graph())))
    # duplicate 3-4 and self-loop 4-4 dropped; both directions stored
    assert ds.edge_index.T.tolist() == [[0, 1], [1, 0], [1, 2], [2, 1], [2, 3], [3, 2],
                                        [3, 4], [4, 3]]
    assert ds.train_mask.any() and ds.num_classes == 2


def test_npz_csr_features_and_masks(tmp_path):
    g = _graph()
    x = sp.csr_array(g.pop("x"))
    masks = {k: np.arange(6) % 3 == i for i, k in enumerate(("train_mask", "val_mask",
                                                              "test_mask"))}
    p = _save(tmp_path, **g, x_indptr=x.indptr, x_indices=x.indices, x_data=x.data,
              x_shape=np.array(x.shape), **masks)
    ds = load_npz(p)
    assert (ds.features.toarray() == x.toarray()).all()
    assert (ds.val_mask == masks["val_mask"]).all()


BAD_NPZ = [
    (dict(edge_index=np.array([[0, 9], [1, 2]])), "node 9, outside 0..5"),
    (dict(edge_index=np.array([[0, -1], [1, 2]])), "negative node id -1"),
    (dict(edge_index=np.array([0, 1, 2])), r"'edge_index' must be \[2, E\]"),
    (dict(edge_index=np.array([[0.0], [1.0]])), "'edge_index' must be integer"),
    (dict(x=np.full((6, 4), np.nan, np.float32)), "non-finite value"),
    (dict(x=np.full((6, 4), np.inf, np.float32)), "non-finite value"),
    (dict(x=np.ones((5, 4), np.float32)), "features have 5 rows but 'y' has 6"),
    (dict(x=np.ones(6, np.float32)), "'x' must be 2-D"),
    (dict(y=np.array([0, 1, -2, 0, 1, 0])), "label -2 is negative"),
    (dict(y=np.array([0, 1, 0, 99, 1, 0])), "label 99 is out of range"),
    (dict(y=np.array([[0, 1, 0, 1, 0, 1]])), "'y' must be 1-D"),
    (dict(y=np.zeros(0, np.int64), x=np.zeros((0, 4), np.float32)), "empty graph"),
    (dict(y=np.ones(6) * 0.5), "'y' must be integer"),
    (dict(train_mask=np.ones(6, bool)), "all three"),
    (dict(train_mask=np.ones(5, bool), val_mask=np.ones(6, bool),
          test_mask=np.ones(6, bool)), r"'train_mask' must have shape \(6,\)"),
]


@pytest.mark.parametrize(("override", "message"), BAD_NPZ)
def test_npz_bad_input_is_named(tmp_path, override, message):
    g = _graph()
    g.update(override)
    with pytest.raises(DatasetError, match=message):
        load_npz(_save(tmp_path, **g))


def test_npz_missing_keys_and_files(tmp_path):
    g = _graph()
    del g["edge_index"]
    with pytest.raises(DatasetError, match="missing array 'edge_index'"):
        load_npz(_save(tmp_path, **g))
    g = _graph()
    del g["x"]
    with pytest.raises(DatasetError, match="missing.*x_indptr"):
        load_npz(_save(tmp_path, **g))
    with pytest.raises(DatasetError, match="does not exist"):
        load_npz(tmp_path / "absent.npz")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(DatasetError, match="cannot read"):
        load_npz(tmp_path / "junk.npz")


def test_npz_bad_csr_features(tmp_path):
    g = _graph()
    del g["x"]
    p = _save(tmp_path, **g, x_indptr=np.array([0, 1, 1, 1, 1, 1, 1]),
              x_indices=np.array([7]), x_data=np.array([1.0]), x_shape=np.array([6, 4]))
    with pytest.raises(DatasetError, match="column 7 outside 0..3"):
        load_npz(p)


# ------------------------------------------------------------------------ synthetic


def test_synthetic_is_deterministic():
    a, b = make_synthetic(nodes=500, seed=3), make_synthetic(nodes=500, seed=3)
    assert np.array_equal(a.edge_index, b.edge_index)
    assert (a.features != b.features).nnz == 0
    assert np.array_equal(a.labels, b.labels)
    c = make_synthetic(nodes=500, seed=4)
    assert not np.array_equal(a.edge_index, c.edge_index)


def test_synthetic_structure():
    ds = make_synthetic(nodes=5000, degree=10, classes=5)
    src, dst = ds.edge_index
    assert not np.any(src == dst)
    deg = np.bincount(src, minlength=ds.num_nodes)
    assert deg.max() > 10 * deg.mean()  # power-law: hubs far above the mean
    same = (ds.labels[src] == ds.labels[dst]).mean()
    assert same > 0.7  # homophily 0.8 planted (plus chance matches)
    assert set(np.unique(ds.features.data)) == {1.0}
    assert ds.features.nnz / (ds.num_nodes * ds.num_features) < 0.05


@pytest.mark.parametrize("spec", ["synthetic:nodes=100", "synthetic:nodes=100000,degree=20"])
def test_synthetic_sizes(spec):
    ds = load_dataset(spec)
    assert ds.num_nodes == int(spec.split("nodes=")[1].split(",")[0])
    assert ds.train_mask.sum() > 0 and ds.test_mask.sum() > 0
    if ds.num_nodes == 100000:
        assert ds.num_edges > 1_000_000


@pytest.mark.parametrize(("spec", "message"), [
    ("synthetic:nodes=5", "nodes must be an integer >= 10"),
    ("synthetic:size=5", "bad synthetic option 'size=5'"),
    ("synthetic:nodes=abc", "bad synthetic option nodes='abc'"),
    ("synthetic:homophily=2", "homophily must be in"),
    ("synthetic:degree=0", "degree must be > 0"),
])
def test_synthetic_bad_options(spec, message):
    with pytest.raises(DatasetError, match=message):
        load_dataset(spec)


def test_seeded_split_is_disjoint_and_balanced():
    labels = np.repeat(np.arange(7), 300)
    tr, va, te = seeded_split(labels, seed=0)
    assert np.bincount(labels[tr]).tolist() == [20] * 7
    assert va.sum() == 500 and te.sum() == 1000
    assert not ((tr & va) | (tr & te) | (va & te)).any()
