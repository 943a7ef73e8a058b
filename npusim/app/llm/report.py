"""The LLM run's report: TTFT, TPOT, tokens per second, DRAM bytes and energy per token, what bounds decode, and the
per-op table of one decode layer (:func:`llm_report`); its text form (:func:`llm_summary`) and CSV rows
(:func:`llm_rows`)."""

from __future__ import annotations

from isa.arch import Arch
from npusim.app.llm.workload import (
    LlmRun,
    PieceRun,
    busiest_unit,
    cost_of,
    decode_pieces,
    dram_bound_cycles,
    first_decode,
    kv_bytes,
    mean,
    weight_bytes,
)

DRAM_BOUND_SLACK = 1.15
"""A decode step within this factor of its DRAM bound is called bandwidth-bound; above it the report names the
busiest unit of the decode layer instead."""
BUSY_BOUND = 0.6
"""A unit busy this fraction of a decode layer's cycles is named as what bounds it."""


def _totals(pieces: list[tuple[PieceRun, float]]) -> dict:
    """A phase's ``macs``, ``dram_bytes_read``, ``dram_bytes_written`` and ``energy_by_kind_pj`` (pJ by action
    kind, docs/energy.md): its pieces' run reports, each counted its weight's times."""
    total = lambda read: sum(n * read(p.report) for p, n in pieces)   # noqa: E731
    kinds = dict.fromkeys(k for p, _ in pieces for k in p.report["energy"]["by_kind_pj"])
    return {"macs": round(total(lambda r: r["macs"])),
            "dram_bytes_read": round(total(lambda r: r["dram"]["bytes_read"])),
            "dram_bytes_written": round(total(lambda r: r["dram"]["bytes_written"])),
            "energy_by_kind_pj": {k: total(lambda r, k=k: r["energy"]["by_kind_pj"].get(k, 0.0)) for k in kinds}}


def _prefill(run: LlmRun, arch: Arch) -> dict:
    w = run.workload
    pieces = list(run.prefill.values())
    cost = cost_of(pieces)
    return {"cycles": round(cost.cycles), "seconds": cost.cycles / (arch.clock.ghz * 1e9),
            "dram_bytes": round(cost.dram_bytes), "energy_pj": cost.energy_pj, "tokens": w.prompt * w.batch,
            **_totals(pieces)}


def _bytes_per_token(run: LlmRun, dram_per_step: float) -> dict:
    """Decode DRAM bytes per generated token (per sequence: a step's bytes over the batch), split by kind."""
    w = run.workload
    pasts = w.decode_pasts
    kv = [kv_bytes(w, p) for p in pasts]
    weights, kv_r, kv_w = weight_bytes(run), mean([r for r, _ in kv]), mean([x for _, x in kv])
    per = w.batch
    return {"total": dram_per_step / per, "weights": weights / per, "kv_read": kv_r / per, "kv_written": kv_w / per,
            "other": (dram_per_step - weights - kv_r - kv_w) / per}


def _decode(run: LlmRun, arch: Arch) -> dict:
    w = run.workload
    pieces, steps = decode_pieces(run), len(w.decode_pasts)
    total = cost_of(pieces)
    cycles, dram, energy = total.cycles, total.dram_bytes, total.energy_pj
    per_step = cycles / steps
    by_kind = _bytes_per_token(run, dram / steps)
    needed = (by_kind["weights"] + by_kind["kv_read"] + by_kind["kv_written"]) * w.batch
    bound = dram_bound_cycles(needed, arch)
    layer = _largest(first_decode(run)).report
    unit, busy = busiest_unit(layer)
    bound_by = ("DRAM bandwidth" if per_step <= DRAM_BOUND_SLACK * bound else
                f"the {unit} unit ({busy:.0%} busy)" if busy >= BUSY_BOUND else
                f"latency: no unit is busy {BUSY_BOUND:.0%} of the time (the busiest, {unit}, {busy:.0%}): DRAM round "
                f"trips and dependencies between small steps")
    return {"steps": steps, "cycles": round(cycles), "seconds": cycles / (arch.clock.ghz * 1e9),
            "dram_bytes": round(dram), "energy_pj": energy, "cycles_per_token": per_step,
            "dram_bytes_per_token": by_kind, "energy_per_token_pj": energy / steps / w.batch,
            "dram_bound_cycles_per_token": bound, "bound_ratio": per_step / bound if bound else None,
            "bound_by": bound_by,
            "bandwidth_utilization": dram / steps / (per_step * float(arch.dram_timing.bytes_per_cycle)),
            "memory_roof": layer["memory_roof"],
            "simulated_contexts": sorted(p + 1 for p in run.varying),
            "interpolated": len(run.varying) < steps, **_totals(pieces)}


def _largest(step: dict):
    """The run of the piece that takes most of a step's cycles (the decoder layer)."""
    return max(step.values(), key=lambda rk: rk[0].cycles * rk[1])[0]


def _ops(run: LlmRun) -> list[dict]:
    """The first simulated decode step's rows, piece by piece (a piece counted k times has its rows times k)."""
    if not run.varying:
        return []
    rows = []
    for piece, (r, k) in first_decode(run).items():
        rows += [{"piece": piece, "name": x["name"], "op": x["op"], "cycles": x["cycles"] * k,
                  "dram_bytes": x["dram_bytes"] * k, "energy_pj": x["energy_pj"] * k, "bound": x["bound"]}
                 for x in r.report["layers"]]
    return rows


def llm_report(run: LlmRun, arch: Arch) -> dict:
    """The JSON report. Keys: ``ttft_s``, ``tpot_s``, ``tokens_per_s`` (the batch's decode throughput),
    ``tokens_per_s_per_sequence``, ``prefill`` and ``decode`` (``cycles``, ``dram_bytes``, ``energy_pj``, ...;
    ``decode.cycles_per_token`` is a step's cycles, ``decode.dram_bytes_per_token`` a sequence's bytes by kind),
    ``ops`` (one decode step by op), ``notes``."""
    w, dec = run.workload, run.workload.decoder
    prefill = _prefill(run, arch)
    out = {"model": dec.name, "arch": arch.name, "weights": getattr(dec, "weights", "as exported"), "kv": w.kv,
           "batch": w.batch, "prompt": w.prompt, "generate": w.generate, "layers": dec.layers,
           "ttft_s": prefill["seconds"], "prefill": prefill}
    notes = [f"one decoder layer simulated per step and counted {dec.layers} times (the layers have the same "
             f"shapes); layers run back to back"] if dec.layers > 1 else []
    if w.generate > 1:
        decode = _decode(run, arch)
        tpot = decode["seconds"] / decode["steps"]
        out.update(tpot_s=tpot, tokens_per_s=w.batch / tpot, tokens_per_s_per_sequence=1 / tpot, decode=decode)
        if decode["interpolated"]:
            notes.append(f"decode steps simulated at contexts {decode['simulated_contexts']}, the others "
                         f"interpolated linearly in the context length")
    else:
        out.update(tpot_s=None, tokens_per_s=None, tokens_per_s_per_sequence=None, decode=None)
    out["kv_cache"] = _cache(run, arch)
    out["ops"] = _ops(run)
    out["notes"] = notes
    return out


def _cache(run: LlmRun, arch: Arch) -> dict:
    """Where the KV cache lives and how it is laid out, and its size after the last token."""
    w = run.workload
    tokens = w.prompt + w.generate - 1
    nbytes = kv_bytes(w, tokens - 1)[0]
    layout = getattr(w.decoder, "cache_layout", "as the model's past/present tensors")
    return {"layout": layout, "element": w.kv, "in": "DRAM", "bytes": nbytes, "tokens": tokens,
            "in_place": True, "spm_bytes": arch.spm.size,
            "note": f"appended in place: a step writes its new keys and values only (the present outputs hold "
                    f"the past inputs); the graphs keep it in DRAM (the SPM holds {arch.spm.size:,} B)"}


def llm_rows(report: dict) -> list[dict]:
    """CSV rows: one per op of a decode step (:func:`llm_report`'s ``ops``)."""
    return [{"model": report["model"], "arch": report["arch"], "weights": report["weights"], **r}
            for r in report["ops"]]


def _si_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f} B"


def llm_summary(report: dict) -> str:
    """The text a user reads: TTFT, TPOT, tokens/s, what bounds decode, bytes and energy per token."""
    p = report["prefill"]
    lines = [f"{report['model']} on {report['arch']}: weights {report['weights']}, KV cache {report['kv']}, batch "
             f"{report['batch']}, prompt {report['prompt']}, generate {report['generate']}",
             f"prefill: {p['cycles']:,} cycles, TTFT {p['seconds'] * 1e3:,.2f} ms, DRAM {_si_bytes(p['dram_bytes'])}, "
             f"energy {p['energy_pj'] / 1e9:,.3f} mJ"]
    d = report["decode"]
    if d:
        b = d["dram_bytes_per_token"]
        lines += [f"decode: TPOT {report['tpot_s'] * 1e3:,.3f} ms ({d['cycles_per_token']:,.0f} cycles a step), "
                  f"{report['tokens_per_s']:,.2f} tokens/s for the batch, "
                  f"{report['tokens_per_s_per_sequence']:,.2f} per sequence",
                  f"  per token: DRAM {_si_bytes(b['total'])} (weights {_si_bytes(b['weights'])}, KV read "
                  f"{_si_bytes(b['kv_read'])}, KV written {_si_bytes(b['kv_written'])}, other {_si_bytes(b['other'])}"
                  f"), energy {d['energy_per_token_pj'] / 1e6:,.2f} uJ",
                  f"  bound: {d['bound_by']}; the DRAM bound (weights + KV at dram.gb_per_s) is "
                  f"{d['dram_bound_cycles_per_token']:,.0f} cycles a step, the run {d['bound_ratio']:.2f}x that; "
                  f"DRAM bandwidth used {d['bandwidth_utilization']:.0%}"]
    c = report["kv_cache"]
    lines.append(f"KV cache: {_si_bytes(c['bytes'])} after {c['tokens']} tokens in {c['in']}, {c['element']}, "
                 f"{c['layout']}; appended in place")
    lines += _top_ops(report["ops"])
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)


def _top_ops(ops: list[dict], n: int = 8) -> list[str]:
    """The ``n`` ops of a decode step that take the most cycles (a layer's ops counted over every layer)."""
    if not ops:
        return []
    total = sum(o["cycles"] for o in ops)
    out = [f"decode step by op (top {min(n, len(ops))} of {len(ops)}; a layer's ops over all layers):"]
    for o in sorted(ops, key=lambda o: -o["cycles"])[:n]:
        out.append(f"  {o['piece'] + ': ' + o['name']:48} {o['op']:12} {o['cycles']:>14,} cycles "
                   f"{o['cycles'] / total:>6.1%}  {_si_bytes(o['dram_bytes']):>10}  {o['bound']}")
    return out
