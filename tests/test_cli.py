"""The ``mixgcn`` command line: JSON report, progress, clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

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


def test_make_ops_refuses_bad_combinations():
    from mixgcn.gen.config import CHIP_PRESETS
    from mixgcn.host.chip_driver import ChipBackend, PlanningDevice
    from mixgcn.host.train import make_ops

    with pytest.raises(TypeError, match="expected a Backend, got 'fpga'"):
        make_ops("fixed16", "fpga")
    with pytest.raises(ValueError, match="unknown precision 'int3'"):
        make_ops("int3")
    chip = ChipBackend(PlanningDevice(CHIP_PRESETS["tiny"]))
    with pytest.raises(ValueError, match="backend 'rtl' computes in fixed point"):
        make_ops("float32", chip)


def test_version(capsys):
    from mixgcn import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"mixgcn {__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"]])
def test_help_is_plain_text(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    assert "usage: mixgcn" in out
    for markup in (":mod:", ":class:", ":func:", "``"):
        assert markup not in out, f"--help shows Sphinx markup {markup!r}"


def test_unwritable_json_is_refused_before_training(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for target, message in ((blocker / "run.json", "a-file is not a folder"),
                            (tmp_path, "is a directory")):
        t0 = time.perf_counter()
        with pytest.raises(SystemExit, match=message):
            main(["train", "--epochs", "1000000", "--json", str(target)])
        assert time.perf_counter() - t0 < 5  # refused before a million epochs
    if os.getuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        with pytest.raises(SystemExit, match="locked is not writable"):
            main(["train", "--epochs", "1000000", "--json", str(locked / "run.json")])


@pytest.mark.parametrize(("args", "message"), [
    (["--chip", "tiny"], "--chip applies to --backend rtl or board only"),
    (["--no-pipeline"], "--no-pipeline applies to --backend rtl or board only"),
    (["--memory", "hbm"], "--memory applies to --backend rtl or board only"),
    (["--backend", "rtl", "--port", "sim"], "--port applies to --backend board only"),
    (["--backend", "rtl", "--baud", "9600"], "--baud applies to --backend board only"),
    (["--board", "icebreaker"], "--board applies to --backend board only"),
    (["--backend", "board", "--baud", "70000000"],
     "a 100 MHz clock cannot make 70,000,000 baud"),
    (["--backend", "rtl", "--chip", "huge"], "unknown chip 'huge': expected one of tiny, "
                                             "default, micro, ecp5 or a .json file"),
    (["--backend", "rtl", "--chip", "nowhere.json"], "chip file nowhere.json: No such file"),
    (["--backend", "rtl", "--precision", "float32"], "--precision float32 is not available"),
    (["--backend", "board", "--precision", "float32"], "--precision float32 is not available"),
])
def test_backend_options_are_checked(args, message):
    with pytest.raises(SystemExit, match=message):
        main(["train", "--epochs", "1", *args])


def test_a_bad_chip_file_is_refused_naming_the_bad_value(tmp_path):
    from mixgcn.gen.config import CHIP_PRESETS

    path = tmp_path / "chip.json"
    for change, message in ((dict(addr_width=3), "addr_width must be in 8..32, got 3"),
                            (dict(lanes=5), "lanes is 5, but the parameters give 4"),
                            (dict(colour="red"), "unknown key.* 'colour'")):
        path.write_text(json.dumps({**CHIP_PRESETS["tiny"].to_dict(), **change}))
        with pytest.raises(SystemExit, match=message):
            main(["train", "--backend", "rtl", "--chip", str(path), "--epochs", "1"])
    path.write_text("{not json")
    with pytest.raises(SystemExit, match="is not JSON"):
        main(["train", "--backend", "rtl", "--chip", str(path), "--epochs", "1"])
