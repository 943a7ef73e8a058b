"""Tables of JSON run reports: the per-layer rows of one run (``npusim run --csv``) and two runs side by side per
layer and per unit (``npusim diff``). They read the report dicts alone, so reports written earlier work too."""

from __future__ import annotations

import csv
import io
from collections import Counter
from typing import Any

from isa.errors import NpuSimError

LAYER_FIELDS = ("name", "op", "start", "end", "cycles", "macs", "mac_utilization", "bound", "dram_bytes")


def keyed_layers(layers: list[dict]) -> dict[str, dict]:
    """Layers by name; a repeated name gets ``#2``, ``#3``, ... in program order."""
    seen: Counter[str] = Counter()
    out = {}
    for lr in layers:
        seen[lr["name"]] += 1
        out[lr["name"] + (f"#{seen[lr['name']]}" if seen[lr["name"]] > 1 else "")] = lr
    return out


def layer_rows(report: dict) -> list[dict[str, Any]]:
    """One flat row per layer: LAYER_FIELDS, ``time_split_<part>`` (cycles), ``energy_pj`` and
    ``energy_<kind>_pj``, for the fields the report has."""
    layers = report.get("layers")
    if not layers:
        raise NpuSimError("the report has no layers[]; per-layer tables come from `npusim run MODEL --json`")
    rows = []
    for lr in layers:
        row = {k: lr[k] for k in LAYER_FIELDS if k in lr}
        row |= {f"time_split_{part}": v for part, v in lr.get("time_split", {}).items()}
        if "energy_pj" in lr:
            row["energy_pj"] = lr["energy_pj"]
            row |= {f"energy_{kind}_pj": v for kind, v in lr["energy_by_kind_pj"].items()}
        rows.append(row)
    return rows


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV text of ``rows`` (the first row's keys are the header)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


# ------------------------------------------------------------------------------------------------ two runs
def _get(d: dict, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


TOTALS = (("cycles", "cycles"), ("time_us", "time_us"), ("macs", "macs"), ("mac_utilization", "mac_utilization"),
          ("issued_mac_utilization", "issued_mac_utilization"), ("matrix_busy", "matrix_busy"),
          ("array_fill_while_busy", "array_fill_while_busy"),
          ("dram.bytes_read", "dram_bytes_read"), ("dram.bytes_written", "dram_bytes_written"),
          ("energy.total_pj", "energy_pj"), ("energy.dynamic_pj", "dynamic_energy_pj"),
          ("energy.static_pj", "static_energy_pj"), ("energy.per_inference_pj", "energy_per_inference_pj"),
          ("energy.average_power_w", "average_power_w"), ("energy.edp_js", "edp_js"),
          ("area.total_mm2", "area_mm2"), ("memory_roof.gb_per_s", "memory_roof_gb_per_s"),
          ("memory_roof.binds", "memory_roof_binds"))


def check_report(report: Any, source: str) -> None:
    """Raise NpuSimError naming the first field that :func:`diff_rows` reads and that is not what npusim's reports
    hold there: metrics (numbers of at most 64 bits, text, true/false or null), ``units`` an object of objects,
    ``layers`` a list of objects with a text ``name``."""
    def bad(where: str, want: str, v: Any) -> None:
        raise NpuSimError(f"{source}: the report's {where} must be {want}, not {str(v)[:60]!r}; is it a report of "
                          f"`npusim run --json` or `npusim simulate --json`?")

    def metric(where: str, v: Any) -> None:
        if isinstance(v, dict | list) or isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 1 << 63:
            bad(where, "a number (at most 64 bits), text, true/false or null", v)

    def table(where: str, v: Any) -> dict:
        if not isinstance(v, dict):
            bad(where, "an object", v)
        return v

    if not isinstance(report, dict):
        bad("top level", "an object", report)
    for path, _ in TOTALS:
        metric(path, _get(report, path))
    kinds = _get(report, "energy.by_kind_pj")
    for kind, v in (table("energy.by_kind_pj", kinds) if kinds is not None else {}).items():
        metric(f"energy.by_kind_pj.{kind}", v)
    for unit, u in table("units", report.get("units", {})).items():
        table(f"units.{unit}", u)
        for key in ("busy_cycles", "idle_cycles", "energy_pj"):
            metric(f"units.{unit}.{key}", u.get(key))
        for cause, v in table(f"units.{unit}.stall_cycles", u.get("stall_cycles", {})).items():
            metric(f"units.{unit}.stall_cycles.{cause}", v)
    layers = report.get("layers") or []
    if not isinstance(layers, list):
        bad("layers", "a list", layers)
    for i, lr in enumerate(layers):
        table(f"layers[{i}]", lr)
        if not isinstance(lr.get("name"), str):
            bad(f"layers[{i}].name", "text", lr.get("name"))
        for key in ("cycles", "energy_pj", "bound"):
            metric(f"layers[{i}].{key}", lr.get(key))


def diff_rows(a: dict, b: dict) -> list[dict[str, Any]]:
    """Two reports side by side, one row per (section, name, metric) with values ``a`` and ``b`` (None where a report
    lacks it): the run's totals; per unit its busy and idle cycles, each stall cause and its energy; per layer (matched
    by name, the order of ``a``, then layers only in ``b``) its cycles, energy and bound."""
    rows = arch_rows(a.get("arch") or {}, b.get("arch") or {})
    rows += [{"section": "total", "name": "run", "metric": metric, "a": _get(a, path), "b": _get(b, path)}
             for path, metric in TOTALS if _get(a, path) is not None or _get(b, path) is not None]
    for kind in dict.fromkeys([*(_get(a, "energy.by_kind_pj") or {}), *(_get(b, "energy.by_kind_pj") or {})]):
        rows.append({"section": "total", "name": "run", "metric": f"energy_{kind}_pj",
                     "a": _get(a, f"energy.by_kind_pj.{kind}"), "b": _get(b, f"energy.by_kind_pj.{kind}")})
    ua, ub = a.get("units", {}), b.get("units", {})
    for unit in dict.fromkeys([*ua, *ub]):
        x, y = ua.get(unit, {}), ub.get(unit, {})
        causes = dict.fromkeys([*x.get("stall_cycles", {}), *y.get("stall_cycles", {})])
        metrics = [("busy_cycles", "busy_cycles"), ("idle_cycles", "idle_cycles"),
                   *((f"stall_cycles.{c}", f"stall_{c}") for c in causes), ("energy_pj", "energy_pj")]
        for path, metric in metrics:
            va, vb = _get(x, path), _get(y, path)
            if va or vb:   # a stall cause that is 0 in both runs says nothing
                rows.append({"section": "unit", "name": unit, "metric": metric, "a": va, "b": vb})
    la, lb = keyed_layers(a.get("layers") or []), keyed_layers(b.get("layers") or [])
    for key in dict.fromkeys([*la, *lb]):
        x, y = la.get(key, {}), lb.get(key, {})
        for metric in ("cycles", "energy_pj", "bound"):
            if metric in x or metric in y:
                rows.append({"section": "layer", "name": key, "metric": metric, "a": x.get(metric),
                             "b": y.get(metric)})
    return rows


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _change(a: Any, b: Any) -> tuple[str, str]:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numbers:
        return ("" if a == b else "changed"), ""
    return f"{b - a:+,.4g}" if isinstance(b - a, float) else f"{b - a:+,}", f"{b / a:.3f}x" if a else ""


def arch_rows(a: dict, b: dict) -> list[dict[str, Any]]:
    """One row per Arch field whose value differs between two reports' ``arch`` (section ``arch``, name the Arch
    section, metric the field), the name first: what made the runs differ comes before what differs."""
    rows = []
    if a.get("name") != b.get("name"):
        rows.append({"section": "arch", "name": "arch", "metric": "name", "a": a.get("name"), "b": b.get("name")})
    for sec in dict.fromkeys([*a, *b]):
        x, y = a.get(sec), b.get(sec)
        if not isinstance(x, dict) and not isinstance(y, dict):
            continue
        x, y = x or {}, y or {}
        rows += [{"section": "arch", "name": sec, "metric": f, "a": _plain(x.get(f)), "b": _plain(y.get(f))}
                 for f in dict.fromkeys([*x, *y]) if x.get(f) != y.get(f)]
    return rows


def _plain(v: Any) -> Any:
    """A field's value as one table cell (a list joined with commas)."""
    return ",".join(map(str, v)) if isinstance(v, list | tuple) else v


def program_note(a: dict, b: dict) -> str | None:
    """A warning when reports ``a`` and ``b`` ran different programs (their ``program.sha256`` differ): then their
    differences are the compiler's choices as well as the machine's. None when they ran the same program or a report
    predates the fingerprint."""
    pa, pb = a.get("program") or {}, b.get("program") or {}
    if not pa.get("sha256") or not pb.get("sha256") or pa["sha256"] == pb["sha256"]:
        return None
    return (f"note: A and B ran different programs (sha256 {pa['sha256'][:12]} vs {pb['sha256'][:12]}, "
            f"{pa.get('instructions', 0):,} vs {pb.get('instructions', 0):,} instructions): their differences "
            f"include what the compiler chose for each Arch, not only what the hardware did")


def format_diff(rows: list[dict[str, Any]], a_name: str, b_name: str, all_layers: bool = False) -> str:
    """A text table of :func:`diff_rows`: totals, units, then layers (only those whose cycles or energy changed,
    unless ``all_layers``), with ``B - A`` and ``B / A``."""
    changed = {r["name"] for r in rows if r["section"] == "layer" and r["metric"] != "bound" and r["a"] != r["b"]}
    shown = [r for r in rows if r["section"] != "layer" or all_layers or r["name"] in changed]
    head = ["section", "name", "metric", f"A: {a_name}", f"B: {b_name}", "B - A", "B / A"]
    body = [[r["section"], r["name"], r["metric"], _fmt(r["a"]), _fmt(r["b"]), *_change(r["a"], r["b"])]
            for r in shown]
    width = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    right = (False, False, False, True, True, True, True)
    line = lambda row: "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, width, right)).rstrip()
    hidden = len({r["name"] for r in rows if r["section"] == "layer"}) - len({r["name"] for r in shown
                                                                              if r["section"] == "layer"})
    tail = [f"({hidden} layers with the same cycles and energy not shown; --all-layers shows them)"] if hidden else []
    return "\n".join([line(head), *map(line, body), *tail])
