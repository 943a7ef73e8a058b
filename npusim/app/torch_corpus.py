"""`make torch-corpus`: torchvision and transformers models with random weights (nothing downloaded), exported by both
of torch's ONNX exporters at small input sizes, run on npusim with values and compared with onnxruntime; the table
goes to docs/torch-corpus.md.

    python -m npusim.app.torch_corpus [--md docs/torch-corpus.md] [--only REGEX] [--exporters dynamo torchscript]
                                      [--arch mid32] [--timeout 900] [--json OUT.json] [--from-json RUN.json]

It runs in an environment with torch, torchvision and transformers (the Makefile's .venv-torch). Each model and
exporter is exported and run in a child process of its own, under a time bound, so that one that fails, hangs or
runs out of memory does not stop the rest; the parent prints a line per run as it ends. ``--json`` saves the run,
``--from-json`` writes the report of a saved one again (a before/after pair without running twice).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from npusim.app.conformance import clip, error_cause
from npusim.app.torch_entry import EXPORTERS, Exporter, ExportError, export_module, first_line, input_names


@dataclass(frozen=True)
class Case:
    """One model of the corpus: its ``name``, ``family`` (torchvision classification, segmentation, ..., HF), what
    is fed to it (``inputs``, for the table) and ``build``, which returns (module, example inputs) with seeded
    random weights."""

    name: str
    family: str
    inputs: str
    build: Callable[[], tuple]


def _wrap(module, pick: Callable):
    """``module`` with its output reduced to one tensor by ``pick`` (a segmentation model's ``["out"]``, a HF
    model's ``logits``, RAFT's last flow), as a user exporting it for inference writes; the forward's parameters
    keep the module's names."""
    import torch

    class One(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module   # (its forward names the inputs)

        def forward(self, *args):
            return pick(self.inner(*args))

    return One()


def _image(size: int, channels: int = 3):
    import torch

    return torch.randn(1, channels, size, size)


def _tv(name: str, size: int, **kw) -> Callable[[], tuple]:
    """A torchvision classification model by name, random weights, one image of ``size``."""
    def build():
        import torchvision

        return getattr(torchvision.models, name)(weights=None, **kw), (_image(size),)
    return build


def _seg(name: str, size: int) -> Callable[[], tuple]:
    """A torchvision segmentation model (no backbone weights either), its ``out`` map."""
    def build():
        from torchvision.models import segmentation

        m = getattr(segmentation, name)(weights=None, weights_backbone=None, aux_loss=False)
        return _wrap(m, lambda out: out["out"]), (_image(size),)
    return build


def _fpn() -> tuple:
    import torch
    from torchvision.ops import FeaturePyramidNetwork

    fpn = FeaturePyramidNetwork([16, 32, 64], 32)

    class Fpn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fpn = fpn

        def forward(self, c3, c4, c5):
            return tuple(self.fpn({"c3": c3, "c4": c4, "c5": c5}).values())

    return Fpn(), (_image(32, 16), _image(16, 32), _image(8, 64))


def _raft() -> tuple:
    import torch
    from torchvision.models.optical_flow import raft_small

    m = raft_small(weights=None)

    class Raft(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.raft = m

        def forward(self, image1, image2):
            return self.raft(image1, image2, num_flow_updates=2)[-1]

    return Raft(), (_image(128), _image(128))


def _hf(kind: str) -> tuple:
    """A transformers model from a tiny config (2 layers, width 128), its main output tensor."""
    import torch
    import transformers as tf

    ids = torch.randint(0, 1000, (1, 16))
    text = dict(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                max_position_embeddings=64)
    if kind == "bert":
        m = tf.BertModel(tf.BertConfig(**text))
        return _wrap(m, lambda out: out.last_hidden_state), (ids,)
    if kind == "vit":
        m = tf.ViTModel(tf.ViTConfig(image_size=32, patch_size=8, hidden_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=256))
        return _wrap(m, lambda out: out.last_hidden_state), (_image(32),)
    if kind == "gpt2":
        m = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=64,
                                             use_cache=False))
        return _wrap(m, lambda out: out.logits), (ids,)
    m = tf.LlamaForCausalLM(tf.LlamaConfig(**text, num_key_value_heads=2, use_cache=False))
    return _wrap(m, lambda out: out.logits), (ids,)


CORPUS: tuple[Case, ...] = (
    Case("resnet18", "torchvision classification", "1x3x64x64", _tv("resnet18", 64)),
    Case("mobilenet_v3_small", "torchvision classification", "1x3x64x64", _tv("mobilenet_v3_small", 64)),
    Case("efficientnet_b0", "torchvision classification", "1x3x64x64", _tv("efficientnet_b0", 64)),
    Case("convnext_tiny", "torchvision classification", "1x3x64x64", _tv("convnext_tiny", 64)),
    Case("regnet_y_400mf", "torchvision classification", "1x3x64x64", _tv("regnet_y_400mf", 64)),
    Case("shufflenet_v2_x0_5", "torchvision classification", "1x3x64x64", _tv("shufflenet_v2_x0_5", 64)),
    Case("squeezenet1_1", "torchvision classification", "1x3x64x64", _tv("squeezenet1_1", 64)),
    Case("densenet121", "torchvision classification", "1x3x64x64", _tv("densenet121", 64)),
    Case("googlenet", "torchvision classification", "1x3x64x64",
         _tv("googlenet", 64, aux_logits=False, init_weights=True)),
    Case("mnasnet0_5", "torchvision classification", "1x3x64x64", _tv("mnasnet0_5", 64)),
    Case("swin_t", "torchvision classification", "1x3x64x64", _tv("swin_t", 64)),
    Case("vit_b_16", "torchvision classification", "1x3x32x32", _tv("vit_b_16", 32, image_size=32)),
    Case("lraspp_mobilenet_v3_large", "torchvision segmentation", "1x3x64x64", _seg("lraspp_mobilenet_v3_large", 64)),
    Case("fcn_resnet50", "torchvision segmentation", "1x3x128x128", _seg("fcn_resnet50", 128)),
    Case("deeplabv3_resnet50", "torchvision segmentation", "1x3x64x64", _seg("deeplabv3_resnet50", 64)),
    Case("fpn", "torchvision ops", "16x32x32, 32x16x16, 64x8x8", _fpn),
    Case("raft_small", "torchvision optical flow", "2 x 1x3x128x128, 2 updates", _raft),
    Case("hf_bert", "transformers", "ids 1x16", lambda: _hf("bert")),
    Case("hf_vit", "transformers", "1x3x32x32", lambda: _hf("vit")),
    Case("hf_gpt2", "transformers", "ids 1x16", lambda: _hf("gpt2")),
    Case("hf_llama", "transformers", "ids 1x16", lambda: _hf("llama")),
)
"""The corpus: torchvision classification, segmentation, an FPN, RAFT, Swin and ViT; HF BERT, ViT, GPT-2, Llama."""


@dataclass
class Outcome:
    """How one model fared with one exporter. ``status``: ``npu`` (matches onnxruntime, every node on the NPU),
    ``host`` (matches, some nodes on the host CPU), ``export`` (the exporter failed), ``refused`` (a one-line
    NpuSimError), ``mismatch`` (ran, values differ from onnxruntime's: a bug), ``crash`` (another exception: a
    bug), ``timeout`` (killed at the time bound)."""

    model: str
    exporter: str
    status: str = "crash"
    nodes: int | None = None
    host_ops: list[tuple[str, str]] = field(default_factory=list)
    """(op, reason) of every node run on the host."""
    error: str = ""
    cycles: int | None = None
    max_rel_err: float | None = None
    export_seconds: float = 0.0
    seconds: float = 0.0


def run_one(case: Case, exporter: Exporter, arch_name: str) -> Outcome:
    """Export ``case`` with ``exporter`` as :func:`npusim.from_torch` does (:func:`export_module`) and run it on npusim
    (values, default limits, host fallback), compared with onnxruntime. In the child process."""
    import torch

    from isa import NpuSimError
    from isa.arch import load_arch

    out, t0 = Outcome(case.name, exporter.name), time.perf_counter()
    torch.manual_seed(0)
    module, args = case.build()
    names = input_names(getattr(module, "inner", module), len(args))   # (a _wrap's forward takes *args)
    with tempfile.TemporaryDirectory(prefix="torch-corpus-") as tmp:
        try:
            exported, inputs = export_module(module, args, Path(tmp), names=names, exporters=(exporter,))
            out.export_seconds, out.nodes = time.perf_counter() - t0, exported.nodes
            _run(out, exported.path, inputs, load_arch(arch_name))
        except ExportError as e:
            out.status, out.error = "export", str(e).split(": ", 2)[-1]
            out.export_seconds = time.perf_counter() - t0
        except NpuSimError as e:
            out.status, out.error = "refused", " ".join(str(e).split())
        except Exception as e:   # a bug: anything else is not a clean refusal
            out.status, out.error = "crash", first_line(e)
    out.seconds = time.perf_counter() - t0
    return out


def _run(out: Outcome, path: Path, inputs: dict, arch) -> None:
    """Compile and simulate the exported model at ``path`` on ``inputs``, validated against onnxruntime, into
    ``out``."""
    from npusim.app.driver import run_model

    compiled, result, outputs, report = run_model(str(path), arch, inputs, validate=True, cache=False)
    out.cycles, out.host_ops = result.cycles, [(h["op"], h["reason"]) for h in report["host_ops"]]
    checks = report["validation"].values()
    out.max_rel_err = max((v["max_rel_error"] for v in checks), default=0.0)
    ok = all(v["ok"] for v in checks)
    out.status = "mismatch" if not ok else "host" if out.host_ops else "npu"


def _child(case_name: str, exporter_name: str, arch: str, json_out: str) -> int:
    """The child's work: one run, its Outcome as JSON."""
    import warnings

    warnings.simplefilter("ignore")
    case = next(c for c in CORPUS if c.name == case_name)
    exporter = next(e for e in EXPORTERS if e.name == exporter_name)
    Path(json_out).write_text(json.dumps(asdict(run_one(case, exporter, arch))))
    return 0


def run_in_child(case: Case, exporter: Exporter, arch: str, timeout: float) -> Outcome:
    """:func:`run_one` in a child process under ``timeout`` seconds (a ``timeout`` or ``crash`` Outcome when it
    does not finish or dies without writing one)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="torch-corpus-") as tmp:
        json_out = Path(tmp) / "outcome.json"
        cmd = [sys.executable, "-m", "npusim.app.torch_corpus", "--child", case.name, exporter.name, arch,
               str(json_out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Outcome(case.name, exporter.name, "timeout", error=f"killed after {timeout:g} s",
                           seconds=time.perf_counter() - t0)
        if json_out.exists():
            data = json.loads(json_out.read_text())
            data["host_ops"] = [tuple(h) for h in data["host_ops"]]
            return Outcome(**data)
    tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    return Outcome(case.name, exporter.name, "crash", error=f"the child died (exit {proc.returncode}): {tail}",
                   seconds=time.perf_counter() - t0)


STATUS = {"npu": "NPU", "host": "host-assisted", "export": "export failed", "refused": "refused",
          "mismatch": "MISMATCH", "crash": "CRASH", "timeout": "timeout"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(outcomes: list[Outcome]) -> str:
    """The per-run markdown table: model, exporter, outcome, nodes, host ops, max relative error against
    onnxruntime, cycles, seconds (export; all), error."""
    inputs = {c.name: c.inputs for c in CORPUS}
    lines = ["| model | input | exporter | outcome | nodes | host ops | vs onnxruntime | cycles | s (export) | error |",
             "|---|---|---|---|--:|---|--:|--:|--:|---|"]
    for o in outcomes:
        host = ", ".join(f"{op} x{n}" for op, n in Counter(op for op, _ in o.host_ops).most_common())
        err = "" if o.max_rel_err is None else f"{o.max_rel_err:.1e}"
        lines.append(f"| {o.model} | {inputs.get(o.model, '')} | {o.exporter} | {STATUS[o.status]} | "
                     f"{o.nodes if o.nodes is not None else ''} | {_cell(host)} | {err} | "
                     f"{f'{o.cycles:,}' if o.cycles is not None else ''} | {o.seconds:.0f} ({o.export_seconds:.0f}) | "
                     f"{_cell(clip(o.error, 300))} |")
    return "\n".join(lines)


def _reason(error: str) -> str:
    """An error with its names, instructions and range-checked values blanked (conformance's :func:`error_cause`),
    so equal causes group."""
    return clip(error_cause(error), 260)


def summary(outcomes: list[Outcome]) -> str:
    """Counts by exporter and outcome, then the ops run on the host and the failures grouped by cause."""
    exporters = list(dict.fromkeys(o.exporter for o in outcomes))
    lines = ["| exporter | runs | " + " | ".join(STATUS.values()) + " |", "|---|--:|" + "--:|" * len(STATUS)]
    for exp in [*exporters, "all"]:
        sel = [o for o in outcomes if exp in ("all", o.exporter)]
        count = Counter(o.status for o in sel)
        lines.append(f"| {exp} | {len(sel)} | " + " | ".join(str(count[s]) for s in STATUS) + " |")
    host = Counter(key for o in outcomes for key in {(op, _reason(why)) for op, why in o.host_ops})
    failed = Counter((STATUS[o.status], _reason(o.error)) for o in outcomes if o.status not in ("npu", "host"))
    if host:
        lines += ["", "Ops run on the host (runs):", ""]
        lines += [f"- {op}: {_cell(why)} ({n})" for (op, why), n in host.most_common()]
    if failed:
        lines += ["", "Failures by cause (runs):", ""]
        lines += [f"- {status}: {_cell(why)} ({n})" for (status, why), n in failed.most_common()]
    return "\n".join(lines)


def markdown(outcomes: list[Outcome], arch: str, command: str, seconds: float) -> str:
    """docs/torch-corpus.md."""
    import onnx
    import onnxruntime
    import torch
    import torchvision
    import transformers

    versions = (f"torch {torch.__version__}, torchvision {torchvision.__version__}, transformers "
                f"{transformers.__version__}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}")
    return "\n".join([
        "# PyTorch models: torchvision and transformers, both exporters",
        "",
        f"Generated by `{command}` ({versions}; arch {arch}; {seconds / 60:.0f} min). Do not edit by hand.",
        "",
        "Every model has random weights (torchvision `weights=None`, transformers from a tiny config: 2 layers, "
        "width 128), nothing is downloaded. Each is exported at the input size shown by both of torch's exporters "
        "(`torch.onnx.export(..., dynamo=True)` at opset 20, weights in a `.onnx.data` file; `dynamo=False` at "
        "opset 17) in eval mode, the way `npusim.from_torch` does (`npusim.app.torch_entry`), then compiled for "
        "the arch with host fallback and simulated with values under the default limits "
        "(`npusim.app.driver.run_model`), and every output is compared with onnxruntime's on the same inputs "
        "(max |err| / max |reference| <= 1e-3). Models whose output is a dict or a HF `ModelOutput` are wrapped to "
        "return their main tensor (`out`, `last_hidden_state`, `logits`; RAFT its last flow, after 2 updates).",
        "",
        "Outcome: **NPU** matches, every node on the NPU; **host-assisted** matches, some nodes ran on the host "
        "CPU (the ops are listed); **export failed** the exporter itself failed (its first line is the error); "
        "**refused** npusim's one-line error; **MISMATCH**, **CRASH** are bugs; **timeout** did not finish in the "
        "time bound. *nodes* counts the exported graph's nodes; *s (export)* the run's seconds and, in brackets, "
        "the export's.",
        "",
        "## Summary",
        "",
        summary(outcomes),
        "",
        "## Every run",
        "",
        table(outcomes),
        "",
    ])


def run_all(args) -> tuple[list[Outcome], float]:
    """Every selected model with every selected exporter, a progress line each; (outcomes, seconds)."""
    cases = [c for c in CORPUS if not args.only or re.search(args.only, c.name)]
    runs = [(c, e) for c in cases for e in EXPORTERS if e.name in args.exporters]
    t0, outcomes = time.perf_counter(), []
    for k, (case, exporter) in enumerate(runs, 1):
        o = run_in_child(case, exporter, args.arch, args.timeout)
        outcomes.append(o)
        said = f"{o.cycles:,} cycles" if o.cycles is not None else clip(o.error, 160)
        sys.stdout.write(f"[{k}/{len(runs)}] {case.name} {exporter.name}: {STATUS[o.status]}, {said} "
                         f"({o.seconds:.0f} s)\n")
        sys.stdout.flush()
    return outcomes, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(*argv[1:5])
    p = argparse.ArgumentParser(prog="python -m npusim.app.torch_corpus", description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="mid32", help="preset name or TOML path (default mid32)")
    p.add_argument("--only", metavar="REGEX", help="only the models whose name matches")
    p.add_argument("--exporters", nargs="+", default=[e.name for e in EXPORTERS], choices=[e.name for e in EXPORTERS])
    p.add_argument("--timeout", type=float, default=900, help="seconds one export and run may take (default 900)")
    p.add_argument("--md", metavar="OUT.md", help="write the markdown report (docs/torch-corpus.md)")
    p.add_argument("--json", metavar="OUT.json", help="write the run (every outcome) as JSON")
    p.add_argument("--from-json", metavar="RUN.json", help="run nothing: the report of a run saved with --json")
    args = p.parse_args(argv)
    if args.from_json:
        run = json.loads(Path(args.from_json).read_text())
        outcomes = [Outcome(**o | {"host_ops": [tuple(h) for h in o["host_ops"]]}) for o in run["outcomes"]]
        arch, command, seconds = run["arch"], run["command"], run["seconds"]
    else:
        outcomes, seconds = run_all(args)
        full = not args.only and len(args.exporters) == len(EXPORTERS) and args.arch == "mid32"
        arch = args.arch
        command = "make torch-corpus" if full else "python -m npusim.app.torch_corpus " + " ".join(argv)
    sys.stdout.write("\n" + summary(outcomes) + f"\n\n{len(outcomes)} runs in {seconds / 60:.1f} min\n")
    if args.md:
        Path(args.md).write_text(markdown(outcomes, arch, command, seconds))
    if args.json and not args.from_json:
        Path(args.json).write_text(json.dumps({"arch": arch, "command": command, "seconds": seconds,
                                               "outcomes": [asdict(o) for o in outcomes]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
