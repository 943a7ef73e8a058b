"""A ResNet-18 run reports every unit's cycles split by cause, and the split adds up."""

from isa.arch import load_arch
from npusim.app.driver import run_model
from npusim.app.zoo import MODELS
from npusim.sim.stats import STALL_CAUSES


def test_resnet18_stall_causes_add_up():
    # activations in DRAM (resident=False): on dc128 they would stay in the SPM and the DRAM bus would never queue
    _, result, _, report = run_model(MODELS["resnet18"](), load_arch("dc128"), timing_only=True, resident=False)
    units = report["units"]
    assert set(units) == {"dma_load", "dma_store", "matrix", "vector", "host"}
    for u in units.values():
        assert set(u["stall_cycles"]) == set(STALL_CAUSES)
        assert u["busy_cycles"] + u["idle_cycles"] + sum(u["stall_cycles"].values()) == report["cycles"]
    # the causes that shape a real network's timeline all show up
    assert units["dma_load"]["stall_cycles"]["dram_latency"] > 0
    assert units["dma_load"]["stall_cycles"]["dram_bandwidth"] + units["dma_store"]["stall_cycles"][
        "dram_bandwidth"] > 0
    assert units["matrix"]["stall_cycles"]["semaphore"] > 0 and units["vector"]["stall_cycles"]["semaphore"] > 0
    assert report["dram"]["row_hits"] > report["dram"]["row_misses"] > 0
    # 20 convs (the 8 shortcut Adds and every Relu fused into them), maxpool, avgpool, fc and its bias
    assert len(report["layers"]) == 24 and sum(lr["macs"] for lr in report["layers"]) == report["macs"] > 1.8e9
    assert result.macs > report["macs"]   # layer1's 64-channel convs are pixel-packed: half their array MACs are 0
