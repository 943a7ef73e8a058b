"""Conformance data nobody here wrote: the onnx package's backend node tests and its model corpus.

* :func:`node_cases`: onnx's node test cases (model + inputs + reference outputs), built once per process: onnx 1.23
  ships them as code (``onnx/backend/test/case/node``) and builds them in memory; ``cmd_tools generate-data`` writes
  only the model cases, there is no node data directory to generate.
* :func:`claimed_cases`: those whose every node is an op the compiler's registry lowers to the NPU.
"""

from __future__ import annotations

import functools
import json
import re
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.ops import REGISTRY as OP_REGISTRY
from isa import NpuSimError
from isa.arch import Arch
from npusim.app import driver
from npusim.app.onnx_backend import NpuBackend, graph_inputs


def claimed_ops() -> frozenset[str]:
    """Default-domain ONNX ops the registry claims to run on the NPU (an entry with a lowering, or one the importer
    decomposes into ops that have one; not the nodes only a pass makes, like MSDeformAttn, which onnx has no tests
    of)."""
    import onnx

    return frozenset(op for op, spec in OP_REGISTRY.items() if (spec.lower is not None or spec.decomposed)
                     and onnx.defs.has(op))


@functools.cache
def node_cases() -> tuple[list, float]:
    """onnx's backend node test cases (``onnx.backend.test.case.test_case.TestCase``) and the seconds it took to
    build them (every op's ``export*`` functions run numpy references; about 17 s of CPU)."""
    from onnx.backend.test.loader import load_model_tests

    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the reference code's own overflow/divide warnings
        cases = load_model_tests(kind="node")
    return cases, time.process_time() - t0


def case_ops(model: onnx.ModelProto) -> set[str]:
    """The ops of a model's graph, default-domain ones by name, others as ``domain::op``."""
    return {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}" for n in model.graph.node}


def claimed_cases() -> list:
    """The node test cases whose every node is an op of :func:`claimed_ops`, sorted by name."""
    claimed = claimed_ops()
    return sorted((c for c in node_cases()[0] if case_ops(c.model) <= claimed), key=lambda c: c.name)


CONSTANT_INPUTS: dict[str, tuple[int, ...]] = {
    "Conv": (1, 2), "Gemm": (1, 2), "Clip": (1, 2), "LayerNormalization": (1, 2), "Pad": (1, 2, 3),
    "QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2), "QLinearMatMul": (1, 2, 3, 4, 5, 6, 7),
    "QLinearConv": (1, 2, 3, 4, 5, 6, 7, 8), "Pow": (1,), "BatchNormalization": (1, 2, 3, 4),
    "InstanceNormalization": (1, 2), "GroupNormalization": (1, 2), "RMSNormalization": (1,),
}
"""Input indices of each op that exported models carry as initializers (weights, biases, bounds, scales and zero
points, exponents, statistics) and the NPU compiler takes only as constants: a node test feeds them as graph inputs,
and the backend binds them as constants with the test's values (as onnx-mlir's backend tests do). int64/bool inputs
(shapes, axes, pads) are always bound (:mod:`npusim.app.onnx_backend`)."""


def constant_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs of ``model`` that :data:`CONSTANT_INPUTS` binds as constants."""
    inputs = {i.name for i in model.graph.input}
    return sorted({n.input[i] for n in model.graph.node for i in CONSTANT_INPUTS.get(n.op_type, ())
                   if i < len(n.input) and n.input[i] in inputs})


def run_node_case(case, arch: Arch | str = "mid32") -> tuple[str, str]:
    """One node test case on the NPU alone (no host fallback), checked as onnx's runner checks it: (``pass``, "")
    or (``fail``, the one-line NpuSimError or output difference) or (``crash``, another exception and where)."""
    from onnx.backend.test.runner import _normalize_tensor

    try:
        rep = NpuBackend.prepare(case.model, arch=arch, fallback=False, constant_inputs=constant_inputs(case.model))
        for inputs, refs in case.data_sets:
            got = rep.run([_normalize_tensor(x) for x in inputs])
            why = _similar(list(got), [_normalize_tensor(r) for r in refs], case.rtol, case.atol)
            if why:
                return "fail", f"output differs: {why}"
    except NpuSimError as e:
        return "fail", one_line(e)
    except Exception as e:   # a bug: anything else is not a clean refusal
        return "crash", f"{one_line(e)} (at {_our_frame(e)})"
    return "pass", ""


def model_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain opset (None if it imports none)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


# -- the model corpus ----------------------------------------------------------------------------------------------

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
KINDS = ("light", "pytorch-converted", "pytorch-operator")
"""The corpus directories of the onnx wheel: model-zoo classics with reduced weights and PyTorch-exported tests."""


@dataclass(frozen=True)
class CorpusModel:
    """One model of the corpus with its reference data (inputs and outputs shipped by onnx)."""

    kind: str
    name: str
    path: Path
    rtol: float = 1e-3
    atol: float = 1e-7

    def load(self) -> onnx.ModelProto:
        return onnx.load(str(self.path))

    def data(self, model: onnx.ModelProto) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
        """(inputs by name, reference outputs in graph output order). A light model's input is onnx's runner's
        dummy input (``arange / size``) that its shipped reference output was computed with."""
        from onnx.backend.test.runner import Runner

        inputs = graph_inputs(model)
        if self.kind == "light":
            feeds = {i.name: Runner.generate_dummy_data(i, name=self.name) for i in inputs}
            refs = [_read_tensor(self.path.with_name(f"{self.path.stem}_output_{k}.pb"))
                    for k in range(len(model.graph.output))]
            return feeds, refs
        data_set = self.path.parent / "test_data_set_0"
        feeds = {i.name: _read_tensor(data_set / f"input_{k}.pb") for k, i in enumerate(inputs)}
        refs = [_read_tensor(data_set / f"output_{k}.pb") for k in range(len(model.graph.output))]
        return feeds, refs


def _read_tensor(path: Path) -> np.ndarray:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def corpus(kinds: tuple[str, ...] = KINDS) -> list[CorpusModel]:
    """The models of ``kinds`` in the installed onnx wheel, by kind and name."""
    out = []
    for kind in kinds:
        if kind == "light":
            for path in sorted((DATA / "light").glob("light_*.onnx")):
                name = path.stem.removeprefix("light_")
                meta = DATA / "real" / f"test_{name}" / "data.json"
                tol = json.loads(meta.read_text()) if meta.exists() else {}
                out.append(CorpusModel(kind, name, path, tol.get("rtol", 1e-3), tol.get("atol", 1e-7)))
        else:
            out += [CorpusModel(kind, p.parent.name.removeprefix("test_"), p)
                    for p in sorted((DATA / kind).glob("*/model.onnx"))]
    return out


@dataclass
class Outcome:
    """How one corpus model fared on npusim. ``status``: ``npu`` (matches the reference, every node on the NPU),
    ``host`` (matches, some nodes on the host CPU), ``refused`` (a one-line NpuSimError), ``mismatch`` (ran, wrong
    values: a bug), ``crash`` (another exception: a bug)."""

    model: CorpusModel
    opset: int | None
    nodes: int
    status: str = "refused"
    npu_nodes: int | None = None
    host_ops: list[tuple[str, str]] = field(default_factory=list)
    """(op, reason) of every node run on the host."""
    cycles: int | None = None
    reference: str = ""
    """The outputs against onnx's reference outputs (``max rel err``, or what differs)."""
    ort: str = ""
    """onnxruntime's outputs against ours (``max rel err``) or against the reference when npusim did not run."""
    error: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "model"}
        return {"kind": self.model.kind, "name": self.model.name} | d


def one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


def _rel_err(got: np.ndarray, want: np.ndarray) -> float:
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max(initial=0))
    return err / max(float(np.abs(want.astype(np.float64)).max(initial=0)), 1e-30)


def _similar(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float) -> str | None:
    """None if ``got`` matches ``want`` as onnx's backend runner checks it (shape, dtype, allclose), else why not."""
    from onnx.backend.test.runner import Runner

    try:
        Runner.assert_similar_outputs(want, got, rtol, atol)
    except AssertionError as e:
        return " ".join(str(e).split())[:160]
    return None


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | str:
    """onnxruntime's outputs, or its one-line refusal."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return sess.run([o.name for o in model.graph.output], feeds)
    except Exception as e:   # onnxruntime raises its own exception types
        return one_line(e)


def _our_frame(e: BaseException) -> str:
    """``file:line`` of the innermost traceback frame in this project's packages (else the innermost frame)."""
    frames = traceback.extract_tb(e.__traceback__)
    root = Path(__file__).resolve().parents[2]
    packages = [root / p for p in ("isa", "compiler", "npusim")]   # (not a virtual environment inside the checkout)
    ours = [f for f in frames if any(Path(f.filename).resolve().is_relative_to(p) for p in packages)] or frames
    return f"{Path(ours[-1].filename).resolve().relative_to(root) if ours is not frames else ours[-1].filename}:" \
           f"{ours[-1].lineno}"


def run_one(cm: CorpusModel, arch: Arch) -> Outcome:
    """Run one corpus model on npusim (compile with host fallback, simulate with values under the default limits, as a
    user's `npusim run` would) and compare it with the reference outputs and with onnxruntime."""
    t0 = time.perf_counter()
    model = cm.load()
    out = Outcome(cm, model_opset(model), len(model.graph.node))
    feeds, refs = cm.data(model)
    ort_out = _ort(model, feeds)
    try:
        compiled, result, outputs, report = driver.run_model(model, arch, dict(feeds))
    except NpuSimError as e:
        out.error = one_line(e)
    except Exception as e:   # a bug: anything else is not a clean refusal
        out.status, out.error = "crash", f"{one_line(e)} (at {_our_frame(e)})"
    else:
        got = [outputs[o.name] for o in model.graph.output]
        out.cycles, out.host_ops = result.cycles, [(h["op"], h["reason"]) for h in report["host_ops"]]
        out.npu_nodes = len(compiled.graph.nodes) - len(out.host_ops)
        why = _similar(got, refs, cm.rtol, cm.atol)
        out.reference = f"max rel err {max(map(_rel_err, got, refs), default=0):.1e}" if why is None else why
        out.status = "mismatch" if why else "host" if out.host_ops else "npu"
        if isinstance(ort_out, list):
            out.ort = f"max rel err {max(map(_rel_err, got, ort_out), default=0):.1e}"
    if not out.ort:
        out.ort = ort_out if isinstance(ort_out, str) else \
            "matches reference" if _similar(ort_out, refs, cm.rtol, cm.atol) is None else "differs from reference"
    out.seconds = time.perf_counter() - t0
    return out


def run_corpus(models: list[CorpusModel], arch: Arch, progress: bool = False) -> list[Outcome]:
    """:func:`run_one` on every model, with a tqdm bar on stderr if ``progress``."""
    import onnxruntime
    from tqdm import tqdm

    onnxruntime.set_default_logger_severity(3)   # its warnings on every model with initializers listed as inputs
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bar = tqdm(models, desc="corpus", unit="model", disable=not progress, leave=False)
        for cm in bar:
            bar.set_postfix_str(cm.name, refresh=True)
            out.append(run_one(cm, arch))
    return out


STATUS = {"npu": "NPU", "host": "host-assisted", "refused": "refused", "mismatch": "MISMATCH", "crash": "CRASH"}


def table(outcomes: list[Outcome]) -> str:
    """The per-model markdown table: model, opset, nodes, on NPU / on host, result against the reference and
    onnxruntime, cycles, or the one-line error."""
    lines = ["| model | opset | nodes | NPU / host | result | vs reference | vs onnxruntime | cycles | error |",
             "|---|--:|--:|--:|---|---|---|--:|---|"]
    for o in outcomes:
        split = f"{o.npu_nodes} / {len(o.host_ops)}" if o.npu_nodes is not None else ""
        cycles = f"{o.cycles:,}" if o.cycles is not None else ""
        error = clip(o.error, 240).replace("|", "\\|")
        lines.append(f"| {o.model.kind}/{o.model.name} | {o.opset} | {o.nodes} | {split} | {STATUS[o.status]} | "
                     f"{clip(o.reference, 100)} | {clip(o.ort, 100).replace('|', '/')} | {cycles} | {error} |")
    return "\n".join(lines)


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, an ellipsis marking the cut."""
    return text if len(text) <= n else text[:n - 1] + "…"


def error_cause(error: str) -> str:
    """An error with its node and tensor names (quoted), instructions (backquoted) and the value a range check names
    blanked, so equal causes group together."""
    text = re.sub(r"`[^`]*`", "`…`", re.sub(r"'[^']*'", "'…'", re.sub(r"\(and \d+ more[^)]*\)", "", error)))
    return re.sub(r" holds \S+, (beyond|outside) ", r" holds …, \1 ", text).strip()


def summary(outcomes: list[Outcome]) -> str:
    """Counts by kind and status, then what the rest need: ops run on the host (with the reason, by number of
    models) and refusals grouped by cause."""
    from collections import Counter

    kinds = list(dict.fromkeys(o.model.kind for o in outcomes))
    lines = ["| corpus | models | " + " | ".join(STATUS.values()) + " |", "|---|--:|" + "--:|" * len(STATUS)]
    for kind in [*kinds, "all"]:
        sel = [o for o in outcomes if kind in ("all", o.model.kind)]
        count = Counter(o.status for o in sel)
        lines.append(f"| {kind} | {len(sel)} | " + " | ".join(str(count[s]) for s in STATUS) + " |")
    host = Counter((op, error_cause(why)) for o in outcomes for op, why in dict.fromkeys(o.host_ops))
    nodes = Counter((op, error_cause(why)) for o in outcomes for op, why in o.host_ops)
    refused = Counter(error_cause(o.error) for o in outcomes if o.status in ("refused", "crash"))
    if host:
        lines += ["", "Ops run on the host (models / nodes):", ""]
        lines += [f"- {op}: {why} ({n} / {nodes[op, why]})" for (op, why), n in host.most_common()]
    if refused:
        lines += ["", "Refusals and crashes by cause (models):", ""]
        lines += [f"- {clip(why, 300)} ({n})" for why, n in refused.most_common()]
    return "\n".join(lines)


def run_node_cases(arch: Arch | str = "mid32", progress: bool = False) -> list[tuple[object, str, str]]:
    """(case, status, error) of :func:`run_node_case` for every :func:`claimed_cases` case."""
    from tqdm import tqdm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [(c, *run_node_case(c, arch)) for c in tqdm(claimed_cases(), desc="node tests", unit="test",
                                                            disable=not progress, leave=False)]


_DTYPE_REASONS = ((re.compile(r"tensor '…' has dtype (\S+), which is not supported"), "dtype not supported"),
                  (re.compile(r"only float32 tensors are lowered, not (\S+) \('…'\)"), "only float32 is lowered"),
                  (re.compile(r"the (?:input|output) \('…'\) must be int8 or uint8, not (\S+)"), "only int8/uint8"))


def _why(error: str) -> tuple[str, str | None]:
    """A node test's failure in a few words, and the dtype it names (grouped in :func:`node_table`)."""
    text = error_cause(error.split(FALLBACK_CUT)[0].split("; supported:")[0].split("; int8 through")[0])
    text = re.sub(r"^\w+Error: (node '…' \([\w:.]+\): )?", "", text)
    for pattern, key in _DTYPE_REASONS:
        if m := pattern.search(text):
            return key, m.group(1).rstrip(",")
    return text, None


def node_table(results: list[tuple[object, str, str]]) -> str:
    """Per claimed op: its node tests, how many pass on the NPU, and why the others fail (grouped, with counts).
    A function's expanded test (several nodes) counts under ``(expanded)``."""
    from collections import defaultdict

    by_op = defaultdict(list)
    for case, status, error in results:
        nodes = case.model.graph.node
        by_op[nodes[0].op_type if len(nodes) == 1 else "(expanded)"].append((status, error))
    lines = ["| op | tests | pass on the NPU | fail | why they fail (tests) |", "|---|--:|--:|--:|---|"]
    for op in sorted(by_op):
        rows = by_op[op]
        why: dict[str, list[str | None]] = defaultdict(list)
        for status, error in rows:
            if status != "pass":
                key, detail = _why(error)
                why[key].append(detail)
        text = "; ".join(f"{key}{': ' + ', '.join(dict.fromkeys(d)) if d[0] else ''} ({len(d)})"
                         for key, d in sorted(why.items(), key=lambda kv: -len(kv[1])))
        ok = sum(s == "pass" for s, _ in rows)
        lines.append(f"| {op} | {len(rows)} | {ok} | {len(rows) - ok} | {text.replace('|', '/')} |")
    ok = sum(s == "pass" for _, s, _ in results)
    lines.append(f"| **all** | {len(results)} | {ok} | {len(results) - ok} | |")
    return "\n".join(lines)


FALLBACK_CUT = "; without --no-fallback"


def markdown(outcomes: list[Outcome], arch: Arch, command: str, seconds: float,
             nodes: list[tuple[object, str, str]] | None = None) -> str:
    """docs/conformance.md."""
    import onnxruntime

    text = [
        "# Conformance: models nobody here wrote",
        "",
        f"Generated by `{command}` (onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"arch {arch.name}, {seconds:,.0f} s). Do not edit by hand.",
        "",
        "The corpus is what the onnx wheel ships in `onnx/backend/test/data`: `light/` (model-zoo classics with "
        "reduced weights: their inputs are onnx's runner's dummy `arange / size`, their reference outputs ship with "
        "them), `pytorch-converted/` and `pytorch-operator/` (PyTorch-exported modules and operators with one "
        "input/output data set each). Every model is compiled for the arch with host fallback and simulated with "
        "values (`npusim.app.driver.run_model`), then compared with the reference outputs as onnx's backend runner "
        "does (shape, dtype, `allclose` with the model's rtol/atol) and with onnxruntime on the same inputs.",
        "",
        "Result: **NPU** matches, every node on the NPU; **host-assisted** matches, some nodes ran on the host CPU; "
        "**refused** a one-line error (the reason is in the table); **MISMATCH** ran but gave wrong values and "
        "**CRASH** raised something other than a clean error: both are bugs. *NPU / host* counts the compiled "
        "graph's nodes (after folding and fusion). The onnx backend node tests of the ops the compiler claims run "
        "in `make test` (tests/conformance/test_onnx_node.py, with the expected failures listed there).",
        "",
        "## Summary",
        "",
        summary(outcomes),
        "",
        "## Every model",
        "",
        table(outcomes),
    ]
    if nodes:
        text += [
            "",
            "## onnx's node tests of the ops the compiler claims",
            "",
            f"onnx's backend node tests (built in memory from `onnx/backend/test/case/node`: "
            f"{node_cases()[1]:.0f} s of CPU for all {len(node_cases()[0]):,}) whose every node is an op the "
            "registry lowers, run on the NPU alone (no host fallback): a node the NPU cannot take fails. Weights, "
            "bounds, scales and zero points the tests feed as inputs are bound as constants "
            "(`npusim.app.conformance.CONSTANT_INPUTS`). `make test` runs the same tests through onnx's "
            "`Runner` (tests/conformance/test_onnx_node.py) with the failures listed there as expected.",
            "",
            node_table(nodes),
        ]
    return "\n".join(text) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from isa.arch import load_arch

    p = argparse.ArgumentParser(prog="python -m npusim.app.conformance",
                                description="Run the onnx wheel's model corpus on npusim and print the table.")
    p.add_argument("--arch", default="mid32", help="preset name or TOML path (default mid32)")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="corpus directories to run")
    p.add_argument("--only", metavar="REGEX", help="only the models whose kind/name matches")
    p.add_argument("--no-node-tests", dest="node_tests", action="store_false",
                   help="skip onnx's node tests of the claimed ops")
    p.add_argument("--md", metavar="OUT.md", help="write the markdown report (docs/conformance.md)")
    p.add_argument("--json", metavar="OUT.json", help="write every outcome as JSON")
    args = p.parse_args(argv)
    import sys

    arch = load_arch(args.arch)
    models = [m for m in corpus(tuple(args.kinds)) if not args.only or re.search(args.only, f"{m.kind}/{m.name}")]
    t0 = time.perf_counter()
    outcomes = run_corpus(models, arch, progress=sys.stderr.isatty())
    nodes = run_node_cases(arch, progress=sys.stderr.isatty()) if args.node_tests else []
    seconds = time.perf_counter() - t0
    sys.stdout.write(summary(outcomes) + "\n\n" + table(outcomes) + "\n")
    if nodes:
        sys.stdout.write(f"\nnode tests of the claimed ops on the NPU:\n\n{node_table(nodes)}\n")
    sys.stdout.write(f"\n{len(outcomes)} models{f' and {len(nodes)} node tests' if nodes else ''} in "
                     f"{seconds:,.0f} s\n")
    full = not args.only and args.kinds == list(KINDS) and args.node_tests
    command = "make conformance" if full else "python -m npusim.app.conformance " + " ".join(argv or sys.argv[1:])
    if args.md:
        Path(args.md).write_text(markdown(outcomes, arch, command, seconds, nodes))
    if args.json:
        Path(args.json).write_text(json.dumps({"corpus": [o.to_dict() for o in outcomes], "node_tests": [
            {"name": c.name, "ops": sorted(case_ops(c.model)), "status": st, "error": e} for c, st, e in nodes]},
            indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
