"""The ``mixgcn`` command line: JSON report, progress, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mixgcn.host.cli import main

REQUIRED_KEYS = {"dataset", "nodes", "edges", "features", "classes", "backend", "precision",
                 "epochs", "seed", "train_accuracy", "val_accuracy", "test_accuracy",
                 "wall_seconds", "weights_sha256"}


def test_train_writes_json_and_shows_progress(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["train", "--dataset", "synthetic:nodes=300", "--epochs", "20",
                 "--precision", "fixed16", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert REQUIRED_KEYS <= report.keys()
    assert report["epochs"] == 20 and report["precision"] == "fixed16"
    assert report["nodes"] == 300 and len(report["weights_sha256"]) == 64
    captured = capsys.readouterr()
    assert "epoch    20/20" in captured.err and "loss" in captured.err
    assert f"weights sha256: {report['weights_sha256']}" in captured.out


def test_python_dash_m(tmp_path):
    out = tmp_path / "m.json"
    r = subprocess.run([sys.executable, "-m", "mixgcn", "train", "--epochs", "2", "--quiet",
                        "--dataset", "synthetic:nodes=100", "--json", str(out)],
                       capture_output=True, text=True, check=True)
    assert "accuracy:" in r.stdout and json.loads(out.read_text())["epochs"] == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--lr", "-1"], "lr must be a finite number > 0, got -1.0"),
    (["--dropout", "1.5"], r"dropout must be in \[0, 1\), got 1.5"),
    (["--layers", "0"], "layers must be >= 1, got 0"),
    (["--hidden", "0"], "hidden must be >= 1, got 0"),
    (["--dataset", "imagenet"], "unknown dataset 'imagenet'"),
    (["--dataset", "nowhere.npz"], "dataset file nowhere.npz does not exist"),
    (["--dataset", "cora", "--data-dir", "/no/such/dir"], "/no/such/dir does not exist"),
])
def test_bad_input_is_a_clear_error(args, message):
    with pytest.raises(SystemExit, match=message):
        main(["train", "--epochs", "1", *args])


def test_float_precision_on_a_fixed_point_backend_is_refused(monkeypatch):
    from mixgcn.host import train as train_mod

    with pytest.raises(ValueError, match="unknown backend 'fpga'"):
        train_mod.make_ops("fixed16", "fpga")
    with pytest.raises(ValueError, match="unknown precision 'int3'"):
        train_mod.make_ops("int3", "golden")
