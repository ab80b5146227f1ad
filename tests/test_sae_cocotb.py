"""The SAE's generated Verilog under cocotb (Verilator, and Icarus when installed),
bit for bit against the golden SpMM; plus lint and configuration checks."""

from __future__ import annotations

import pytest

from mixgcn.gen.config import SAE_PRESETS, ConfigError, SAEConfig
from mixgcn.gen.verilog import LINT_WAIVERS, lint, sae_verilog
from mixgcn.sim.build import config_env, run_cocotb
from mixgcn.sim.toolchain import available_simulators

from .conftest import planetoid_dir

# E = 1, 2 and 4 pipelines; output FIFO depths 1, 4 (a power of two) and 3 (not one).
# Every configuration holds Cora and the 10 000-leaf star.
SIM_CONFIGS = {
    "tiny": SAE_PRESETS["tiny"],
    "e1_fifo1": SAEConfig(lanes=2, edges=1, max_nodes=10240, out_fifo_depth=1),
    "e4_fifo3": SAEConfig(lanes=4, edges=4, max_nodes=10240, out_fifo_depth=3),
}


SEEDS = {"tiny": 3, "e1_fifo1": 17, "e4_fifo3": 29}  # each configuration's testbench seed


def _cases():
    for sim in available_simulators():
        for name in SIM_CONFIGS:
            if sim == "verilator" or name == "tiny":  # Icarus is slow: one configuration
                yield pytest.param(sim, name, marks=_one_worker(name))


def _one_worker(name):
    """A configuration's runs share its build folder and results file: one test worker."""
    return pytest.mark.xdist_group(f"sae-{name}")


# Cora and the star take most of a configuration's time: `make test` runs them on
# `tiny` and every other case on each configuration; the slow tier runs them on the rest
LARGE = r"\.test_(cora|star)\b"  # cocotb's COCOTB_TEST_FILTER, searched in a test's name


def _run(simulator, name, test_filter=None):
    cfg = SIM_CONFIGS[name]
    env = config_env("MIXGCN_SAE_CONFIG", cfg)
    env.update(MIXGCN_SEED=str(SEEDS[name]),
               MIXGCN_DATA=str(planetoid_dir()))
    if test_filter:
        env["COCOTB_TEST_FILTER"] = test_filter
    results = run_cocotb(sae_verilog(cfg), "sae", "mixgcn.sim.verify.tb_sae",
                         simulator=simulator, extra_env=env)
    return results.read_text()


@pytest.mark.sim
@pytest.mark.parametrize(("simulator", "name"), list(_cases()))
def test_sae_cocotb(simulator, name):
    text = _run(simulator, name, None if name == "tiny" else f"^(?!.*{LARGE})")
    assert ("test_star" in text) == (name == "tiny")


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=_one_worker(n))
                                  for n in SIM_CONFIGS if n != "tiny"])
def test_sae_cocotb_cora_and_star(name):
    text = _run("verilator", name, LARGE)
    assert "test_star" in text and "test_power_law" not in text


@pytest.mark.sim
# the default preset's lint (the largest, 45 s) with the slow tier; the others stay quick
@pytest.mark.parametrize("preset", [pytest.param(p, marks=pytest.mark.slow) if p == "default" else p
                                    for p in SAE_PRESETS])
def test_sae_verilog_lints_clean(preset, tmp_path):
    path = tmp_path / "sae.v"
    path.write_text(sae_verilog(SAE_PRESETS[preset]))
    r = lint(path, "sae", LINT_WAIVERS)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(lanes=0), "SAEConfig.lanes must be in 1..256, got 0"),
    (dict(edges=33), "SAEConfig.edges must be in 1..32, got 33"),
    (dict(edges=True), "SAEConfig.edges must be an integer, got True"),
    (dict(max_nodes=1), "SAEConfig.max_nodes must be in 2..16777216, got 1"),
    (dict(max_degree=1 << 20), r"acc_width=48 can overflow: a row of 1048576 non-zeros"),
    (dict(out_fifo_depth=0), "SAEConfig.out_fifo_depth must be in 1..4096, got 0"),
])
def test_bad_sae_configs_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SAEConfig(**kwargs)


def test_engine_refuses_a_non_config():
    from mixgcn.hdl.sae import SparseAggregationEngine

    with pytest.raises(TypeError, match="expected an SAEConfig, got"):
        SparseAggregationEngine(SAE_PRESETS["tiny"].to_dict())
