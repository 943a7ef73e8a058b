"""The disk compile cache (npusim.app.compile_cache): a hit loads the same compiled model and gives the same cycles,
every part of the key separates entries, a bad entry is a miss, and `npusim run` says which it was."""

import json

import numpy as np
import onnx
import pytest

from compiler.frontend.builder import GraphBuilder, to_onnx
from isa.arch import load_arch
from isa.asm import format_program
from npusim.app import compile_cache
from npusim.app.cli import main
from npusim.app.driver import run_model


def _model() -> onnx.ModelProto:
    b = GraphBuilder("cached")
    x = b.input("x", (1, 8, 6, 6))
    w = np.random.default_rng(0).standard_normal((8, 8, 3, 3)).astype(np.float32)
    b.output(b.relu(b.conv(x, w, pads=1, name="conv"), name="y"))
    return to_onnx(b.build())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NPUSIM_NO_CACHE", raising=False)
    return tmp_path / "cache"


def test_second_run_loads_the_same_program_and_gives_the_same_cycles(cache):
    model, arch = _model(), load_arch("edge16")
    c1, r1, out1, rep1 = run_model(model, arch)
    c2, r2, out2, rep2 = run_model(model, arch)
    assert (rep1["compile_cache"], rep2["compile_cache"]) == ("miss", "hit")
    assert format_program(c2.program) == format_program(c1.program) and (c2.weights == c1.weights).all()
    assert r2.cycles == r1.cycles and list(out1) == list(out2) and all((out2[k] == out1[k]).all() for k in out1)
    assert len(list(cache.glob("*.pkl"))) == 1
    assert rep2["compile_seconds"] >= 0 and rep2["simulate_seconds"] > 0


def test_arch_options_and_model_bytes_each_separate_entries(cache):
    model, arch = _model(), load_arch("edge16")
    run_model(model, arch, timing_only=True)
    changed = arch.with_overrides(["dram.latency_ns=121"])
    assert run_model(model, changed, timing_only=True)[3]["compile_cache"] == "miss"
    assert run_model(model, arch, timing_only=True, prefetch=False)[3]["compile_cache"] == "miss"
    other = _model()
    other.graph.name = "renamed"
    assert run_model(other, arch, timing_only=True)[3]["compile_cache"] == "miss"
    assert run_model(model, arch, timing_only=True)[3]["compile_cache"] == "hit"
    assert len(list(cache.glob("*.pkl"))) == 4


def test_weights_in_an_external_data_file_are_part_of_the_key(cache, tmp_path):
    """The dynamo exporter writes weights to model.onnx.data: the importer reads them from beside the file (checking
    the model's bytes alone failed), and a run validates and then hits the cache; exported again with other weights,
    model.onnx has the same bytes, and the cached program (weights and all) gave the old weights' outputs."""
    path, arch, x = tmp_path / "m.onnx", load_arch("edge16"), np.ones((1, 8, 6, 6), np.float32)
    onnx.save(_model(), str(path), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    first, data = path.read_bytes(), tmp_path / "m.onnx.data"
    _, _, out1, rep1 = run_model(str(path), arch, {"x": x}, validate=True)   # the weights read from beside it
    assert run_model(str(path), arch, {"x": x})[3]["compile_cache"] == "hit"
    (np.fromfile(data, np.float32) * 2).tofile(data)   # the weights doubled, model.onnx as it was
    assert path.read_bytes() == first
    _, _, out2, rep2 = run_model(str(path), arch, {"x": x}, validate=True)
    assert (rep1["compile_cache"], rep2["compile_cache"]) == ("miss", "miss")
    assert rep1["validation"]["y"]["ok"] and rep2["validation"]["y"]["ok"]
    assert np.allclose(out2["y"], 2 * out1["y"], rtol=1e-5) and out1["y"].max() > 0
    assert run_model(str(path), arch, {"x": x})[3]["compile_cache"] == "hit"


def test_opting_out_and_graphs_never_touch_the_cache(cache, monkeypatch):
    model, arch = _model(), load_arch("edge16")
    assert run_model(model, arch, timing_only=True, cache=False)[3]["compile_cache"] == "off"
    from npusim.app.driver import load_model

    assert run_model(load_model(model), arch, timing_only=True)[3]["compile_cache"] == "off"
    monkeypatch.setenv("NPUSIM_NO_CACHE", "1")
    assert run_model(model, arch, timing_only=True)[3]["compile_cache"] == "off"
    assert not cache.exists()


def test_a_corrupt_or_foreign_entry_is_a_miss_and_is_rewritten(cache):
    model, arch = _model(), load_arch("edge16")
    run_model(model, arch, timing_only=True)
    (entry,) = cache.glob("*.pkl")
    for junk in (b"not a pickle", b""):
        entry.write_bytes(junk)
        assert compile_cache.load(entry.stem) is None
        assert run_model(model, arch, timing_only=True)[3]["compile_cache"] == "miss"
        assert run_model(model, arch, timing_only=True)[3]["compile_cache"] == "hit"


def test_an_unwritable_cache_directory_still_runs(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NPUSIM_CACHE_DIR", str(blocker / "cache"))   # a directory under a file cannot be made
    monkeypatch.delenv("NPUSIM_NO_CACHE", raising=False)
    for _ in range(2):
        assert run_model(_model(), load_arch("edge16"), timing_only=True)[3]["compile_cache"] == "miss"


def test_cli_run_says_when_it_used_the_cache(cache, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    lines = []
    for extra in ([], [], ["--no-cache"]):
        assert main(["run", str(path), "--arch", "edge16", "--timing-only", *extra]) == 0
        lines.append([ln for ln in capsys.readouterr().out.splitlines() if "simulated in" in ln][0])
    assert lines[0].startswith("compiled, now in the compile cache in ")
    assert lines[1].startswith("loaded from the compile cache in ")
    assert lines[2].startswith("compiled in ")
    assert main(["run", str(path), "--arch", "edge16", "--timing-only", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compile_cache"] == "hit" and report["compile_seconds"] > 0 and report["simulate_seconds"] > 0


def _entry_sizes(cache):
    return {p.stem: p.stat().st_size for p in cache.glob("*.pkl")}


def test_finding5_cache_keeps_under_its_cap_evicting_the_least_recently_used(cache, monkeypatch):
    """An hour of sweeping filled 3.6 GB: each store now evicts least recently used entries until the cap holds, and a
    hit counts as a use."""
    import os

    arch = load_arch("edge16")
    keys = []
    for preset in ("edge16", "mid32", "dc128"):
        run_model(_model(), load_arch(preset))
        keys.append(max(cache.glob("*.pkl"), key=lambda p: p.stat().st_mtime_ns).stem)
    sizes = _entry_sizes(cache)
    assert len(sizes) == 3
    for age, key in enumerate(keys):   # distinct ages, oldest first (a file system's clock may be coarse)
        os.utime(cache / f"{key}.pkl", (1_000_000 + age, 1_000_000 + age))
    assert run_model(_model(), arch)[3]["compile_cache"] == "hit"   # edge16's entry is now the most recent
    cap = sizes[keys[0]] + sizes[keys[2]]
    monkeypatch.setenv("NPUSIM_CACHE_MAX_BYTES", str(cap))
    assert compile_cache.evict(cache, compile_cache.max_bytes()) == 1
    assert set(_entry_sizes(cache)) == {keys[0], keys[2]}   # mid32's, the least recently used, went
    assert compile_cache.info(cache).bytes <= cap


def test_an_entry_larger_than_the_cap_is_not_kept(cache, monkeypatch):
    monkeypatch.setenv("NPUSIM_CACHE_MAX_BYTES", "100")
    _, _, _, report = run_model(_model(), load_arch("edge16"))
    assert report["compile_cache"] == "miss" and not list(cache.glob("*.pkl"))


def test_finding5_cache_info_and_clear_from_the_command_line(cache, capsys):
    run_model(_model(), load_arch("edge16"))
    size = sum(_entry_sizes(cache).values())
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"{cache}: 1 entries, {size / 2**20:,.1f} MiB of 2,048.0 MiB" in out
    assert main(["cache", "clear"]) == 0
    assert f"removed 1 entries ({size / 2**20:,.1f} MiB) from {cache}" in capsys.readouterr().out
    assert not list(cache.glob("*.pkl")) and compile_cache.info(cache).entries == 0


def test_a_bad_cache_cap_is_a_one_line_error_before_any_compile(cache, monkeypatch, capsys):
    run_model(_model(), load_arch("mid32"))   # an entry for clear to remove
    monkeypatch.setenv("NPUSIM_CACHE_MAX_BYTES", "2G")
    assert main(["cache", "info"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "npusim: error: NPUSIM_CACHE_MAX_BYTES must be a whole number of bytes (e.g. 2147483648), not '2G'"
    with pytest.raises(compile_cache.CacheSettingError, match="NPUSIM_CACHE_MAX_BYTES"):
        run_model(_model(), load_arch("edge16"))
    assert len(list(cache.glob("*.pkl"))) == 1   # nothing compiled and stored before the error
    assert main(["cache", "clear"]) == 0 and not list(cache.glob("*.pkl"))   # clearing needs no cap
