"""The GCN of Kipf & Welling: forward, analytic backward, dropout, loss and Adam.

One layer ``l`` maps ``H`` (``N × F_in``) to ``Z = Â · Hd · W`` with ``Hd`` = dropout of
``H``; hidden layers output ``ReLU(Z)``, the last layer's ``Z`` are the logits.
The kernels run in the cheaper order (docs/architecture.md, §1): ``Â · (Hd · W)`` when
``F_in > F_out`` ("combine first"), else ``(Â · Hd) · W``. Backward, with
``G = dL/dZ``:

- combine first: ``dT = Â · G``; ``dW = Hdᵀ · dT``; ``dHd = dT · Wᵀ``;
- aggregate first (``A = Â · Hd``): ``dW = Aᵀ · G``; ``dA = G · Wᵀ``; ``dHd = Â · dA``

(``Âᵀ = Â``), then ``dH = dropout'(dHd)`` masked by ``ReLU'`` of ``H``. The kernels
(SpMM, GEMM) go through an *ops* object, so the same code trains in float
(:class:`FloatOps`, here) or through the fixed-point engines (``mixgcn.host``);
softmax, loss, dropout and Adam always run on the host in float.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = [
    "GCN",
    "Adam",
    "FloatOps",
    "GCNConfig",
    "accuracy",
    "dropout",
    "softmax_cross_entropy",
]


@dataclass(frozen=True)
class GCNConfig:
    """Model and optimiser hyperparameters (defaults: Kipf & Welling on Cora)."""

    layers: int = 2
    hidden: int = 16
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4  # on the first layer's weights only, as Kipf & Welling
    epochs: int = 200
    seed: int = 0

    def __post_init__(self):
        def bad(name, rule):
            raise ValueError(f"{name} must be {rule}, got {getattr(self, name)!r}")

        for name in ("layers", "hidden", "epochs", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int | np.integer) or isinstance(v, bool):
                bad(name, "an integer")
        if self.layers < 1:
            bad("layers", ">= 1")
        if self.hidden < 1:
            bad("hidden", ">= 1")
        if self.epochs < 0:
            bad("epochs", ">= 0")
        if self.seed < 0:
            bad("seed", ">= 0")
        if not (0.0 <= self.dropout < 1.0):
            bad("dropout", "in [0, 1)")
        if not (np.isfinite(self.lr) and self.lr > 0):
            bad("lr", "a finite number > 0")
        if not (np.isfinite(self.weight_decay) and self.weight_decay >= 0):
            bad("weight_decay", "a finite number >= 0")

    def dims(self, in_features: int, classes: int) -> list[tuple[int, int]]:
        widths = [in_features] + [self.hidden] * (self.layers - 1) + [classes]
        return list(itertools.pairwise(widths))


# ------------------------------------------------------------------- host-side maths


def dropout(x, p: float, rng: np.random.Generator):
    """Inverted dropout on a dense or CSR float array; returns (result, keep-scale).

    For CSR input only the stored non-zeros are dropped (Kipf's sparse dropout). The
    random draws depend only on the shape (or nnz), never on the values, so every
    precision and backend draws the same masks for the same seed."""
    if p == 0.0:
        return x, None
    if sp.issparse(x):
        scale = (rng.random(x.nnz) >= p).astype(x.dtype) / x.dtype.type(1.0 - p)
        out = sp.csr_array((x.data * scale, x.indices, x.indptr), shape=x.shape)
        return out, scale
    scale = (rng.random(x.shape) >= p).astype(x.dtype) / x.dtype.type(1.0 - p)
    return x * scale, scale


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray, mask: np.ndarray):
    """Mean cross-entropy over the masked rows and its gradient w.r.t. the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    idx = np.flatnonzero(mask)
    n = max(len(idx), 1)
    loss = -np.log(np.maximum(p[idx, labels[idx]], np.finfo(p.dtype).tiny)).sum() / n
    grad = np.zeros_like(p)
    grad[idx] = p[idx]
    grad[idx, labels[idx]] -= 1
    return float(loss), grad / p.dtype.type(n)


def accuracy(logits: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> float:
    idx = np.flatnonzero(mask)
    if not len(idx):
        return float("nan")
    return float((logits[idx].argmax(axis=1) == labels[idx]).mean())


@dataclass
class Adam:
    """Adam (Kingma & Ba) with L2 weight decay added to the gradient."""

    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: list = field(default_factory=list)
    v: list = field(default_factory=list)

    def step(self, params: list[np.ndarray], grads: list[np.ndarray], decay: list[float]):
        if not self.m:
            self.m = [np.zeros_like(p) for p in params]
            self.v = [np.zeros_like(p) for p in params]
        self.t += 1
        c1 = 1 - self.beta1**self.t
        c2 = 1 - self.beta2**self.t
        for p, g, wd, m, v in zip(params, grads, decay, self.m, self.v, strict=True):
            g = g + p.dtype.type(wd) * p if wd else g
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * g * g
            p -= (self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)).astype(p.dtype)


# ------------------------------------------------------------------------- float ops


class FloatOps:
    """Every kernel in floating point: the reference the fixed-point path approximates."""

    def __init__(self, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"float precision must be float32 or float64, got {self.dtype}")

    def adjacency(self, adj: sp.csr_array):
        return sp.csr_array(adj, dtype=self.dtype)

    def tensor(self, site: str, x, source=None, rowwise: bool = False):
        return x.astype(self.dtype)

    def to_float(self, t):
        return t

    def positive(self, t) -> np.ndarray:
        return np.asarray(t > 0)

    def spmm(self, site: str, adj, h, relu: bool = False, mask=None):
        return self._finish(adj @ h, relu, mask)

    def spmm_gemm(self, site: str, adj, h, gemm_site: str, form: str, w, relu=False,
                  mask=None):
        """``A = adj · h`` and ``A·W`` (``xw``) or ``A·Wᵀ`` (``xwt``): an SpMM whose rows
        feed a GEMM, which a chip runs as one pipelined pass. Returns (A, product)."""
        a = self.spmm(site, adj, h)
        return a, self.gemm(gemm_site, form, a, w, relu=relu, mask=mask)

    def gemm_spmm(self, site: str, form: str, x, w, spmm_site: str, adj, relu=False,
                  mask=None):
        """``T = x·W`` (``xw``) or ``x·Wᵀ`` (``xwt``) and ``adj · T``: a GEMM whose rows
        fill an SpMM's operand, the other pipelined pass. Returns (T, product)."""
        t = self.gemm(site, form, x, w)
        return t, self.spmm(spmm_site, adj, t, relu=relu, mask=mask)

    def spmm_and_gemm(self, site: str, adj, h, gemm_site: str, form: str, x, w):
        """``adj · h`` and an unrelated GEMM: a chip runs them at once, one on each
        engine. Returns (SpMM result, GEMM result)."""
        return self.spmm(site, adj, h), self.gemm(gemm_site, form, x, w)

    def gemm(self, site: str, form: str, x, w, relu: bool = False, mask=None):
        if form == "xw":
            y = x @ w
        elif form == "xwt":
            y = x @ w.T
        elif form == "xtg":
            y = x.T @ w
        else:
            raise ValueError(f"unknown GEMM form {form!r}")
        return self._finish(y, relu, mask)

    @staticmethod
    def _finish(y, relu, mask):
        if sp.issparse(y):  # a sparse operand times a sparse one: outputs are dense rows
            y = y.toarray()
        y = np.asarray(y)
        if relu:
            y = np.maximum(y, 0)
        if mask is not None:
            y = np.where(mask, y, 0).astype(y.dtype)
        return y


# ------------------------------------------------------------------------------ model


class GCN:
    """A GCN's master weights and its forward/backward through an ops object.

    Weights are Glorot-uniform, no bias (as Kipf & Welling). ``master_dtype`` is the
    optimiser's dtype: float32, or float64 for float64 runs.
    """

    def __init__(self, config: GCNConfig, in_features: int, classes: int,
                 rng: np.random.Generator, master_dtype=np.float32):
        self.config = config
        self.dims = config.dims(in_features, classes)
        self.weights = []
        for fin, fout in self.dims:
            r = np.sqrt(6.0 / (fin + fout))
            self.weights.append(rng.uniform(-r, r, size=(fin, fout)).astype(master_dtype))

    def weights_sha256(self) -> str:
        """sha256 over the weights, layer 0 first, each as little-endian float32 in
        C (row-major) order — the documented fingerprint of a training run."""
        h = hashlib.sha256()
        for w in self.weights:
            h.update(np.ascontiguousarray(w, dtype="<f4").tobytes())
        return h.hexdigest()

    def forward(self, ops, adj, x, rng: np.random.Generator | None):
        """Logits (float) and the cache backward needs; ``rng=None`` means no dropout."""
        p = self.config.dropout if rng is not None else 0.0
        h_float, h = x, None
        cache = []
        last = len(self.weights) - 1
        for l, w_master in enumerate(self.weights):
            hd_float, scale = dropout(h_float, p, rng)
            hd = ops.tensor(f"L{l}.in", hd_float, source=h)  # h: None for the input
            w = ops.tensor(f"L{l}.w", w_master)
            relu = l != last
            fin, fout = self.dims[l]
            if fin > fout:
                t, z = ops.gemm_spmm(f"L{l}.fwd.comb", "xw", hd, w, f"L{l}.fwd.agg", adj,
                                     relu=relu)
                cache.append(dict(order="comb", hd=hd, w=w, scale=scale, h=h, t=t))
            else:
                a, z = ops.spmm_gemm(f"L{l}.fwd.agg", adj, hd, f"L{l}.fwd.comb", "xw", w,
                                     relu=relu)
                cache.append(dict(order="agg", hd=hd, w=w, scale=scale, h=h, a=a))
            h = z
            h_float = ops.to_float(z)
        cache[-1]["z"] = h  # the logits, which the loss's gradient is computed from
        return h_float, cache

    def backward(self, ops, adj, cache, grad_logits: np.ndarray) -> list[np.ndarray]:
        """Weight gradients (master dtype) from ``dL/dlogits``.

        A combine-first layer's weight gradient ``Hdᵀ · dT`` is needed by nobody below
        it, so it waits for the next layer's aggregation when that one runs alone: the
        two then share a batch (``spmm_and_gemm``), the GEMM on the DCE beside the SpMM on
        the SAE. The results are the same whatever the schedule."""
        grads = [None] * len(self.weights)
        pending = None  # (layer, x, dT) of a weight gradient not computed yet

        def keep(l, dw):
            grads[l] = np.asarray(ops.to_float(dw), dtype=self.weights[l].dtype)

        def wgrad(l, x, dt):
            keep(l, ops.gemm(f"L{l}.bwd.wgrad", "xtg", x, dt))

        g = ops.tensor(f"L{len(cache) - 1}.grad", grad_logits, source=cache[-1]["z"],
                       rowwise=True)  # softmax and loss work on whole rows
        for l in range(len(cache) - 1, -1, -1):
            c = cache[l]
            mask = ops.positive(c["h"]) if l > 0 else None  # ReLU' of this layer's input
            if c["order"] == "comb":
                if l:
                    if pending:  # the DCE is about to be busy: no room beside this pair
                        wgrad(*pending)
                        pending = None
                    dt, dhd = ops.spmm_gemm(f"L{l}.bwd.agg", adj, g, f"L{l}.bwd.comb", "xwt",
                                            c["w"], mask=mask)
                elif pending:
                    pl, px, pdt = pending
                    dt, dw = ops.spmm_and_gemm(f"L{l}.bwd.agg", adj, g, f"L{pl}.bwd.wgrad",
                                               "xtg", px, pdt)
                    keep(pl, dw)
                    pending = None
                else:
                    dt = ops.spmm(f"L{l}.bwd.agg", adj, g)
                pending = (l, c["hd"], dt)
            else:
                if pending:
                    wgrad(*pending)
                    pending = None
                wgrad(l, c["a"], g)
                if l:
                    _, dhd = ops.gemm_spmm(f"L{l}.bwd.comb", "xwt", g, c["w"],
                                           f"L{l}.bwd.agg", adj, mask=mask)
            if l:
                dh = ops.to_float(dhd)
                if c["scale"] is not None:
                    dh = dh * c["scale"]
                g = ops.tensor(f"L{l - 1}.grad", dh, source=dhd)
        if pending:
            wgrad(*pending)
        return grads
