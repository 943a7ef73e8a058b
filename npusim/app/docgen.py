"""Generate the tables in docs/ from the code, so they cannot drift: ``python -m npusim.app.docgen [--check]``.

Each generated table sits between ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` in a
hand-written page; only that region is rewritten.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
from pathlib import Path

from isa import Act, BinOp, DType, Reduce
from isa.arch import SECTIONS, load_arch, preset_names
from isa.instructions import INSTRUCTION_CLASSES

ROOT = Path(__file__).resolve().parents[2]

MNEMONICS = {
    "DmaCopy": "`dma.ld`, `dma.st`", "DmaFill": "`dma.ld.fill`, `dma.st.fill`", "MatMul": "`mxu.mm[.z]`",
    "VecBinary": "`vpu.<op>[.<red>][.z]`", "VecUnary": "`vpu.act.<f>[.<red>][.z]`, `vpu.red.<red>[.z]`",
    "VecConvert": "`vpu.cvt`", "VecRequant": "`vpu.rq`", "Gather": "`vpu.gather`, `dma.ld.gather`",
    "HostCall": "`host.call`",
    "Sync": "`dma.ld.sync`, `dma.st.sync`, `mxu.sync`, `vpu.sync`, `host.sync`",
    "Barrier": "`barrier`", "Halt": "`halt`"}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def instruction_table() -> str:
    rows = ["| mnemonic | class (opcode) | syntax | fields | semantics |", "|---|---|---|---|---|"]
    for cls in INSTRUCTION_CLASSES:
        names = [f.name for f in dataclasses.fields(cls) if f.name not in ("waits", "signals", "unit")]
        doc = inspect.getdoc(cls) or ""
        first, _, rest = doc.partition("\n\n")
        syntax, sep, semantics = first.partition("``: ")
        syntax, semantics = (syntax.strip("`"), semantics) if sep else ("", first)
        rows.append(f"| {MNEMONICS[cls.__name__]} | `{cls.__name__}` ({int(cls.opcode)}) | `{_cell(syntax)}` | "
                    f"{', '.join(f'`{n}`' for n in names)} | {_cell(semantics + ' ' + rest)} |")
    return "\n".join(rows)


def enum_table() -> str:
    rows = ["| kind | values |", "|---|---|"]
    rows.append("| dtypes | " + ", ".join(f"`{d.text}` ({d.size} B)" for d in DType) + " |")
    for enum, what in ((BinOp, "vpu binary ops"), (Act, "vpu unary functions"), (Reduce, "reductions")):
        rows.append(f"| {what} | " + ", ".join(f"`{e.name.lower()}`" for e in enum) + " |")
    return "\n".join(rows)


def arch_table() -> str:
    presets = {n: load_arch(n) for n in preset_names()}
    rows = ["| field | unit | meaning | allowed | default | " + " | ".join(presets) + " |",
            "|---|---|---|---|---|" + "---|" * len(presets)]
    for sec, klass in SECTIONS.items():
        for f in dataclasses.fields(klass):
            vals = [getattr(getattr(a, sec), f.name) for a in presets.values()]
            fmt = lambda v: ", ".join(v) if isinstance(v, tuple) else str(v).lower() if isinstance(v, bool) else str(v)
            allowed = _cell(getattr(f.metadata["check"], "allowed", ""))
            rows.append(f"| `{sec}.{f.name}` | {f.metadata['unit']} | {_cell(f.metadata['doc'])} | {allowed} | "
                        f"{fmt(f.default)} | " + " | ".join(fmt(v) for v in vals) + " |")
    return "\n".join(rows)


def semantics() -> str:
    """The functional model's module docstring (the value rules every kernel follows) as markdown."""
    from npusim.functional import execute as functional

    doc = (inspect.getdoc(functional) or "").replace("``", "`")
    intro, _, body = doc.partition("\nGeneral\n")
    out = [" ".join(intro.split("\n\n", 1)[-1].split()), "\n**General**\n"]
    for line in body.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            out.append(f"\n**{line.strip()}**\n")
        elif line.lstrip().startswith("- "):
            out.append("- " + line.strip()[2:])
        else:
            out[-1] += " " + line.strip()
    return "\n".join(out).strip()


def _scalesim_rows(name: str) -> list[dict]:
    import csv

    with open(ROOT / "tests" / "data" / name) as f:
        return list(csv.DictReader(f))


def _ss_arch(rows: int, cols: int, dataflow: str, overlap: bool = False):
    return load_arch("mid32", [f"matrix.rows={rows}", f"matrix.cols={cols}", f"matrix.dataflow={dataflow}",
                               f"matrix.fold_overlap={str(overlap).lower()}"])


def validation_gemm_table() -> str:
    from npusim.app.driver import run_gemm

    rows = ["| case | M | N | K | array | dataflow | SCALE-Sim | npusim | npusim - SCALE-Sim - 1 |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in _scalesim_rows("scalesim_reference.csv"):
        M, N, K, R, C = (int(r[k]) for k in ("M", "N", "K", "rows", "cols"))
        res, _ = run_gemm(M, N, K, DType.I8, _ss_arch(R, C, r["dataflow"]), timing_only=True, ideal_memory=True)
        ss, ours = int(r["scalesim_total_cycles"]), res.unit["matrix"].busy
        rows.append(f"| {r['name']} | {M} | {N} | {K} | {R}x{C} | {r['dataflow']} | {ss:,} | {ours:,} | "
                    f"{ours - ss - 1} |")
    return "\n".join(rows)


def validation_resnet_table() -> str:
    from npusim.app.driver import run_topology
    from npusim.app.topology import Layer

    ref = _scalesim_rows("scalesim_resnet18_32x32_ws.csv")
    layers = [Layer(r["layer"], int(r["M"]), int(r["N"]), int(r["K"])) for r in ref]
    off = run_topology(layers, _ss_arch(32, 32, "ws"), ideal_memory=True)["layers"]
    on = run_topology(layers, _ss_arch(32, 32, "ws", overlap=True), ideal_memory=True)["layers"]
    rows = ["| layer | M | N | K | SCALE-Sim | npusim, no overlap | difference | npusim, fold_overlap | speed-up |",
            "|---|---|---|---|---|---|---|---|---|"]
    tot = [0, 0, 0]
    for r, a, b in zip(ref, off, on):
        ss = int(r["scalesim_total_cycles"])
        x, y = a["units"]["matrix"]["busy_cycles"], b["units"]["matrix"]["busy_cycles"]
        tot = [tot[0] + ss, tot[1] + x, tot[2] + y]
        rows.append(f"| {r['layer']} | {r['M']} | {r['N']} | {r['K']} | {ss:,} | {x:,} | {x - ss - 1} | {y:,} | "
                    f"{x / y:.2f}x |")
    rows.append(f"| **total** | | | | {tot[0]:,} | {tot[1]:,} | {tot[1] - tot[0] - len(ref)} | {tot[2]:,} | "
                f"{tot[1] / tot[2]:.2f}x |")
    return "\n".join(rows)


def ops_table() -> str:
    """Every ONNX op the compiler takes, from its registry: where it runs and under which conditions."""
    from compiler.ops import REGISTRY as OP_REGISTRY

    rows = ["| op | on the NPU | how, and when |", "|---|---|---|"]
    for op in sorted(OP_REGISTRY):
        spec = OP_REGISTRY[op]
        where = "yes" if spec.lower else "yes, decomposed" if spec.decomposed else "no"
        rows.append(f"| `{op}` | {where} | {_cell(spec.npu)} |")
    return "\n".join(rows)


def op_options_table() -> str:
    """Every op option the registry declares (:data:`compiler.ops.OPTIONS`): its op, values, default and meaning."""
    from compiler.ops import REGISTRY as OP_REGISTRY

    rows = ["| option | op | values | default | what it chooses |", "|---|---|---|---|---|"]
    for op in sorted(OP_REGISTRY):
        for o in OP_REGISTRY[op].options:
            rows.append(f"| `{o.name}` | `{op}` | {', '.join(f'`{v}`' for v in o.values)} | `{o.default}` | "
                        f"{_cell(o.doc)} |")
    return "\n".join(rows)


def energy_tables() -> str:
    """Every value of every bundled technology table with its unit, source and derivation, then the sources."""
    from isa.techtable import SCHEMA, load_table, table_names, unit

    out = []
    for name in table_names():
        t = load_table(name)
        out += [f"### `{name}`: {t.description}", "", "| entry | unit | value | source | how |",
                "|---|---|---|---|---|"]
        for section in SCHEMA:
            for key, e in t.entries[section].items():
                out.append(f"| `[{section}].{key}` | {unit(section, key)} | {e.value:g} | {e.source} | "
                           f"{_cell(e.note)} |")
        out += ["", "Sources:", ""] + [f"- `{k}`: {_cell(v)}" for k, v in t.sources.items()] + [""]
    return "\n".join(out).rstrip()


def energy_presets_table() -> str:
    """What the bundled tables give at each preset's sizes: per-byte SRAM energy, area and leakage."""
    from isa.energy import area_mm2, leakage_w, table_of

    rows = ["| preset | table, DRAM | SPM read / write | ACC read / write | DRAM | area | static power |",
            "|---|---|---|---|---|---|---|"]
    for n in preset_names():
        a = load_arch(n)
        t = table_of(a)
        spm = [t.sram_pj_per_byte(a.spm.size, w) for w in (False, True)]
        acc = [t.sram_pj_per_byte(a.acc.size, w) for w in (False, True)]
        rows.append(f"| `{n}` | {a.energy.table}, {a.energy.dram} | {spm[0]:.3g} / {spm[1]:.3g} pJ/B | "
                    f"{acc[0]:.3g} / {acc[1]:.3g} pJ/B | {t.dram_pj_per_byte(a.energy.dram):.3g} pJ/B | "
                    f"{area_mm2(a)['total']:.3g} mm² | {sum(leakage_w(a).values()) * 1e3:.3g} mW |")
    return "\n".join(rows)


def arch_speeds_table() -> str:
    """Each preset's DRAM and host speeds in core cycles, as :mod:`isa.speeds` converts them."""
    rows = ["| preset | clock | DRAM bus | DRAM latency | row miss | bus ticks per cycle | host launch | host bytes | "
            "host ops |", "|---|---|---|---|---|---|---|---|---|"]
    for n in preset_names():
        a = load_arch(n)
        d, h = a.dram_timing, a.host_timing
        rows.append(f"| `{n}` | {a.clock.ghz:g} GHz | {a.dram.gb_per_s:g} GB/s = {d.bytes_per_cycle} B/cycle | "
                    f"{a.dram.latency_ns:g} ns = {d.latency} cycles | {a.dram.row_miss_ns:g} ns = {d.row_miss} "
                    f"cycles | {d.ticks} | {a.host.launch_ns:g} ns = {h.launch:,} cycles | {a.host.gb_per_s:g} GB/s = "
                    f"{h.bytes_per_cycle} B/cycle | {a.host.gops:g}/ns = {h.ops_per_cycle}/cycle |")
    return "\n".join(rows)


def preset_table() -> str:
    rows = ["| preset | what it models |", "|---|---|"]
    rows += [f"| `{n}` | {load_arch(n).description} |" for n in preset_names()]
    return "\n".join(rows)


def sweep_columns_table() -> str:
    from npusim.app.sweep import COMPILE_FREE_FIELDS, METRICS

    rows = ["| column | unit / meaning |", "|---|---|", "| `workload` | the workload's name |",
            "| `section.field` | one per overridden Arch field: the value in effect at the point |"]
    rows += [f"| `{name}` | {_cell(m.unit + (', ' + m.meaning if m.meaning else ''))} |" for name, m in METRICS.items()]
    rows.append("| `error` | empty, or why the point cannot run (`ExceptionType: message`); its metrics are empty |")
    free = ", ".join(f"`{sec}.{name}`" for sec, name in COMPILE_FREE_FIELDS)
    return "\n".join(rows) + f"\n\nFields the compiler never reads (points differing only in them compile once): " \
        f"{free}."


def perception_convtranspose_table() -> str:
    """The ConvTranspose cases of the perception bench (:data:`npusim.app.seedbench.convt.CASES`): shape, MACs of
    the split and of the swelled convolution, input bytes of each (f32), where the shape comes from."""
    from npusim.app.seedbench.convt import CASES, SMALL_CASES, SOURCES, input_tensor_bytes

    rows = ["| case | input N x C x H x W | out channels | kernel, attributes | output | useful MACs (split) | "
            "swelled MACs | input bytes split / swelled | runs | source |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, ct in CASES.items():
        rows.append(f"| {name} | {ct.N} x {ct.C} x {ct.H} x {ct.W} | {ct.K} | {ct.R}x{ct.S}, {ct.text} | "
                    f"{ct.OH} x {ct.OW} | {ct.macs:,} | {ct.swelled_macs:,} | {input_tensor_bytes(ct, 'split'):,} / "
                    f"{input_tensor_bytes(ct, 'swell_dram'):,} | "
                    f"{'with values' if name in SMALL_CASES else 'timing only'} | {_cell(SOURCES[name])} |")
    return "\n".join(rows)


def perception_sample2d_table() -> str:
    """The Resize/GridSample cases of the perception bench (:mod:`npusim.app.seedbench.sample`): shape, what is
    sampled, the variants that apply, where the shape comes from; the small cases (run with values) after."""
    from npusim.app.seedbench.sample import CASES, SMALL, variants

    rows = ["| case | op | input N x C x H x W | mode | sampling | output | variants | runs | source |",
            "|---|---|---|---|---|---|---|---|---|"]
    for case in CASES + SMALL:
        if case.op == "Resize":
            how, out = f"x{case.scale}, {case.ctm}", f"{case.h * case.scale} x {case.w * case.scale}"
        else:
            grid = "BEV re-gridding" if case.grid == "slice" else f"rotation by {case.angle:g} degrees"
            how, out = f"{grid}, align_corners={case.align_corners}", f"{case.h} x {case.w}"
        rows.append(f"| {case.name} | {case.op} | {case.n} x {case.c} x {case.h} x {case.w} | {case.mode} | {how} | "
                    f"{out} | {', '.join(variants(case))} | {'with values' if case in SMALL else 'timing only'} | "
                    f"{_cell(case.source)} |")
    return "\n".join(rows)


def perception_msda_table() -> str:
    """The deformable attention cases of the perception bench (:mod:`npusim.app.seedbench.msda`): value maps,
    queries, samples and the unfused graph's sampled tensor; the small cases (run with values) after."""
    from npusim.app.seedbench.msda import CASES, SMALL

    rows = ["| case | bs | levels (H x W) | queries | points per level | heads x D | bilinear samples | sampled tensor "
            "(f32 bytes) | runs | source |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in CASES + SMALL:
        samples = c.bs * c.heads * c.queries * len(c.levels) * c.points
        rows.append(f"| {c.name} | {c.bs} | {', '.join(f'{h} x {w}' for h, w in c.levels)} | {c.queries:,} | "
                    f"{c.points} | {c.heads} x {c.dims} | {samples:,} | {c.sampled_bytes:,} | "
                    f"{'with values' if c in SMALL else 'timing only'} | {_cell(c.source)} |")
    return "\n".join(rows)


def llm_configs_table() -> str:
    """Every named decoder of ``npusim llm`` (:data:`npusim.app.llm.configs.MODELS`): its shapes, weights and the KV
    cache bytes one token adds (f32), and where the shapes come from."""
    from npusim.app.llm.configs import MODELS
    from npusim.app.llm.workload import KV_BYTES

    rows = ["| config | layers | hidden | heads (KV heads) x head dim | MLP | vocab | norm, MLP, positions | weights | "
            "KV cache per token (f32) | shapes from |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in MODELS.values():
        form = f"{'RMSNorm' if c.norm == 'rms' else 'LayerNorm'}, {'SwiGLU' if c.mlp == 'swiglu' else 'GELU'}, " \
            f"{'RoPE' if c.rope else 'learned'} ({c.max_positions:,})"
        rows.append(f"| `{c.name}` | {c.layers} | {c.hidden:,} | {c.heads} ({c.kv_heads}) x {c.head_dim} | {c.ffn:,} | "
                    f"{c.vocab:,} | {form}{', tied head' if c.tied else ''} | {c.params:,} | "
                    f"{c.kv_bytes_per_token(KV_BYTES['f32']):,} B | {_cell(c.source)} |")
    return "\n".join(rows)


def _doc_paragraphs(module) -> str:
    """A module's docstring as Markdown paragraphs: ``code`` and Sphinx roles (:func:`x`) as `code`."""
    doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", (inspect.getdoc(module) or "").replace("``", "`"))
    return "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n"))


def llm_assumptions() -> str:
    """What ``npusim llm`` simulates and assumes: the docstrings of :mod:`npusim.app.llm.workload` (the pieces, the
    sampled steps) and :mod:`npusim.app.llm.decoder` (the graphs, the cache layout, the weight formats)."""
    from npusim.app.llm import decoder, workload

    return _doc_paragraphs(workload) + "\n\n" + _doc_paragraphs(decoder)


TABLES = {"docs/isa.md": {"instructions": instruction_table, "enums": enum_table, "semantics": semantics},
          "docs/arch.md": {"arch-fields": arch_table, "arch-speeds": arch_speeds_table},
          "README.md": {"presets": preset_table},
          "docs/ops.md": {"ops": ops_table, "op-options": op_options_table},
          "docs/perception.md": {"perception-convtranspose-cases": perception_convtranspose_table,
                                 "perception-sample2d-cases": perception_sample2d_table,
                                 "perception-msda-cases": perception_msda_table},
          "docs/energy.md": {"energy-tables": energy_tables, "energy-presets": energy_presets_table},
          "docs/validation.md": {"scalesim-gemm": validation_gemm_table, "scalesim-resnet18": validation_resnet_table},
          "docs/sweep.md": {"sweep-columns": sweep_columns_table},
          "docs/llm.md": {"llm-configs": llm_configs_table, "llm-assumptions": llm_assumptions}}


def render(text: str, tables: dict) -> str:
    for name, make in tables.items():
        pattern = re.compile(rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(<!-- END GENERATED: {name} -->)", re.S)
        if not pattern.search(text):
            raise KeyError(f"no GENERATED: {name} markers")
        body = make() + "\n"
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a page is out of date instead of writing it")
    args = ap.parse_args(argv)
    stale = []
    for page, tables in TABLES.items():
        path = ROOT / page
        old = path.read_text()
        new = render(old, tables)
        if new != old:
            stale.append(page)
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        sys.stderr.write(f"out of date: {', '.join(stale)} (run python -m npusim.app.docgen)\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
