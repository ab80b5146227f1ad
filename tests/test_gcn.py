"""The float GCN: analytic gradients against finite differences, Adam, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.golden.datasets import make_synthetic
from mixgcn.golden.gcn import GCN, Adam, FloatOps, GCNConfig, softmax_cross_entropy
from mixgcn.golden.graph import normalized_adjacency


@pytest.mark.parametrize(("features", "hidden", "layers"), [(10, 4, 3), (3, 8, 2), (5, 5, 1)])
def test_backward_matches_finite_differences(features, hidden, layers):
    """Both kernel orders, ReLU' masks and dropout, in float64."""
    rng = np.random.default_rng(0)
    n, classes = 12, 3
    edges = rng.integers(0, n, size=(2, 30))
    adj = normalized_adjacency(np.concatenate([edges, edges[::-1]], axis=1), n)  # undirected
    x = sp.csr_array(np.where(rng.random((n, features)) < 0.6, rng.normal(size=(n, features)), 0))
    labels = rng.integers(0, classes, n)
    mask = rng.random(n) < 0.7
    cfg = GCNConfig(layers=layers, hidden=hidden, dropout=0.3)
    model = GCN(cfg, features, classes, rng, master_dtype=np.float64)
    ops = FloatOps(np.float64)

    def loss_and_grads():
        logits, cache = model.forward(ops, adj, x, np.random.default_rng(42))  # fixed masks
        loss, g = softmax_cross_entropy(logits, labels, mask)
        return loss, model.backward(ops, adj, cache, g)

    _, grads = loss_and_grads()
    eps = 1e-6
    for w, g in zip(model.weights, grads, strict=True):
        for idx in list(np.ndindex(w.shape))[:: max(1, w.size // 15)]:
            old = w[idx]
            w[idx] = old + eps
            lp, _ = loss_and_grads()
            w[idx] = old - eps
            lm, _ = loss_and_grads()
            w[idx] = old
            assert abs((lp - lm) / (2 * eps) - g[idx]) < 1e-7 + 1e-5 * abs(g[idx])
    assert any(np.abs(g).max() > 1e-3 for g in grads)  # the check saw real gradients


def test_adam_step_by_hand():
    p = [np.array([1.0, -2.0])]
    opt = Adam(lr=0.1)
    g = np.array([0.5, -0.25])
    opt.step(p, [g], [0.1])
    g2 = g + 0.1 * np.array([1.0, -2.0])
    m, v = 0.1 * g2, 0.001 * g2**2
    want = np.array([1.0, -2.0]) - 0.1 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-8)
    assert np.allclose(p[0], want, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("layers", 0, "layers must be >= 1, got 0"),
    ("hidden", -3, "hidden must be >= 1, got -3"),
    ("dropout", 1.0, r"dropout must be in \[0, 1\), got 1.0"),
    ("lr", float("nan"), "lr must be a finite number > 0, got nan"),
    ("lr", 0.0, "lr must be a finite number > 0, got 0.0"),
    ("weight_decay", -1e-4, "weight_decay must be a finite number >= 0, got -0.0001"),
    ("epochs", -1, "epochs must be >= 0, got -1"),
    ("seed", -5, "seed must be >= 0, got -5"),
    ("epochs", 2.5, "epochs must be an integer, got 2.5"),
])
def test_bad_hyperparameters_are_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        GCNConfig(**{field: value})


def test_weights_sha256_documented_order():
    import hashlib

    model = GCN(GCNConfig(), 4, 2, np.random.default_rng(0))
    want = hashlib.sha256(b"".join(w.astype("<f4").tobytes() for w in model.weights))
    assert model.weights_sha256() == want.hexdigest()


def test_float_ops_forward_is_the_dense_formula():
    ds = make_synthetic(nodes=200, seed=1)
    adj = normalized_adjacency(ds.edge_index, ds.num_nodes)
    model = GCN(GCNConfig(), ds.num_features, ds.num_classes, np.random.default_rng(0),
                np.float64)
    logits, _ = model.forward(FloatOps(np.float64), adj, ds.features.astype(np.float64), None)
    a, x = adj.toarray(), ds.features.toarray()
    h = np.maximum(a @ x @ model.weights[0], 0)
    assert np.allclose(logits, a @ h @ model.weights[1], atol=1e-12)
