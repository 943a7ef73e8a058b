"""Run one fuzz case under a time bound and say what happened (its :data:`OUTCOMES`).

The oracles for an accepted input: round trips are exact (assembly -> program -> assembly, program -> binary ->
program), timing-only cycles equal the cycles with values, a model's outputs match onnxruntime's, a loaded Arch
survives TOML and drives the cost model and the simulator. An input the case marks ``bad`` must be refused.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import signal
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cases import Case

OUTCOMES = ("accepted", "refused", "uncaught", "hang", "cli", "silent", "oracle")
"""accepted; refused with the project's error; an uncaught exception (or the CLI's internal error, exit 70); a hang
(over the time bound); a CLI traceback or wrong exit status or not one line; a bad input silently accepted; an
oracle mismatch on an accepted input."""
BUGS = frozenset(OUTCOMES) - {"accepted", "refused"}


class Hang(BaseException):
    """The case ran past its time bound (a BaseException, so that no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def time_bound(seconds: float):
    """Raise :class:`Hang` in this (main) thread after ``seconds`` of wall time."""
    def alarm(signum, frame):
        raise Hang(f"over {seconds:g} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Result:
    outcome: str
    detail: str = ""


FUZZ_SECONDS = 1.0
"""The estimated seconds of value kernels a fuzz case may simulate: well inside the time bound (the estimate errs on
the slow side; the default limits allow 10 minutes; a case above this one is refused, as the default would refuse a
larger one)."""
FUZZ_ELEMENTS = 2 * 10**8
"""The same for a checkout whose limits count element operations (before the time estimate)."""


def _limited(**kw):
    """``kw`` plus limits=... where the simulator takes them (an older checkout does not)."""
    import inspect

    from npusim import simulate

    if "limits" in inspect.signature(simulate).parameters:
        from npusim.sim.limits import Limits

        timed = "seconds" in Limits.__dataclass_fields__
        kw["limits"] = Limits(seconds=FUZZ_SECONDS) if timed else Limits(elements=FUZZ_ELEMENTS)
    return kw


class Oracle(Exception):
    """An accepted input whose result breaks an oracle."""


def _where(e: BaseException) -> str:
    """``Type: message (file:line in function)`` of the innermost frame of the project that raised ``e``."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if "/tests/" not in f.filename and "site-packages" not in f.filename] or frames
    f = ours[-1] if ours else None
    at = f" ({Path(f.filename).name}:{f.lineno} in {f.name})" if f else ""
    return f"{type(e).__name__}: {' '.join(str(e).split())[:200]}{at}"


class Context:
    """Per-process state: a scratch directory, the CLI's fixture files, parsed seeds."""

    def __init__(self, workdir: Path):
        from .fixtures import write_files

        self.dir = Path(workdir)
        self.files = write_files(self.dir / "files")
        self.counter = itertools.count()
        self.warm_up()

    def warm_up(self) -> None:
        """Load the value kernels and the compiler once, so that no case pays for it against its time bound."""
        from isa.arch import load_arch
        from isa.asm import parse_program

        from .fixtures import seed_programs, tiny_inputs

        for text in seed_programs():
            try:
                _check_program(parse_program(text))
            except Exception:  # noqa: BLE001, S110 - deadlock.s and the host call refuse, as they should
                pass
        for name in ("edge16", "mid32"):
            _drive(load_arch(name))
        _inputs(Case("inputs", "run_model", tiny_inputs()), self)
        from .onnx_cases import seed_models

        for data in seed_models():
            try:
                _onnx(Case("onnx", "model", data), self)
            except Exception:  # noqa: BLE001, S110 - the warm-up only loads code; the cases judge
                pass
        for kind in ("timeline", "util"):
            run_cli(["plot", self.files["sim.json"], "--kind", kind, "-o", self.out() + ".png"])

    def out(self) -> str:
        return str(self.dir / f"out{next(self.counter)}")


def run_case(case: Case, ctx: Context, seconds: float = 5.0) -> Result:
    """Run ``case``; never raises (a hang is a Result too)."""
    from isa import NpuSimError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with time_bound(seconds):
                return _RUN[case.surface](case, ctx)
    except Hang as e:
        return Result("hang", str(e))
    except Oracle as e:
        return Result("oracle", str(e))
    except NpuSimError as e:
        return Result("refused", " ".join(str(e).split())[:200])
    except Exception as e:  # noqa: BLE001 - this is what the fuzzer looks for
        return Result("uncaught", _where(e))


def _verdict(case: Case, detail: str = "") -> Result:
    return Result("silent", detail or "bad input accepted") if case.bad else Result("accepted", detail)


# ---- programs ------------------------------------------------------------------------------------------------
def _program_case(case: Case, ctx: Context, suffix: str) -> Result:
    from isa.files import read_program

    path = ctx.dir / f"case{suffix}"
    path.write_bytes(case.data)
    program = read_program(path)
    _check_program(program)
    return _verdict(case)


def _check_program(program) -> None:
    """Round trips, then timing-only vs values cycles on edge16 (a refusal by the simulator is a fine outcome)."""
    from isa import HostCall
    from isa.arch import load_arch
    from isa.asm import format_program, parse_program
    from isa.encoding import decode_program, encode_program
    from npusim import simulate

    text = format_program(program)
    if parse_program(text) != program:
        raise Oracle("assembly round trip differs")
    if format_program(parse_program(text)) != text:
        raise Oracle("canonical assembly is not a fixed point")
    if decode_program(encode_program(program)) != program:
        raise Oracle("binary round trip differs")
    arch = load_arch("edge16")
    timing = simulate(program, arch, timing_only=True)
    hosts = {i.fn: (lambda dram: None) for i in program.instrs if isinstance(i, HostCall)}
    values = simulate(program, arch, host_functions=hosts, **_limited())
    if values.cycles != timing.cycles:
        raise Oracle(f"timing-only {timing.cycles} cycles, with values {values.cycles}")


def _asm(case: Case, ctx: Context) -> Result:
    return _program_case(case, ctx, ".s")


def _binary(case: Case, ctx: Context) -> Result:
    return _program_case(case, ctx, ".npub")


# ---- Arch ----------------------------------------------------------------------------------------------------
def _arch(case: Case, ctx: Context) -> Result:
    from isa.arch import Arch, load_arch

    if case.kind == "override":
        preset, items = case.data
        arch = load_arch(preset, items)
    elif case.kind == "toml":
        path = ctx.dir / "case.toml"
        path.write_bytes(case.data)
        arch = load_arch(str(path))
    else:
        arch = Arch.from_dict(case.data)
    if Arch.from_toml(arch.to_toml()) != arch:
        raise Oracle("Arch TOML round trip differs")
    _drive(arch)
    return _verdict(case)


PROBE = """\
.config rows=1 cols=1 spm={spm} acc={acc}
.region X r0 65536
dma.ld shape[16,16] dst=spm:0x0<{t}>{{{r},{e}}} src=dram:X+0x40<{t}>{{{w},{e}}}
dma.ld shape[3,5,7] dst=spm:0x0<{t}>{{0,{e},0}} src=dram:X+0x3<{t}>{{4096,640,{e}}}
vpu.add shape[16,16] dst=spm:0x0<i8>{{16,1}} src0=spm:0x0<i8>{{16,1}} imm=1
mxu.mm.z shape[2] m=1 k=1 n=1 acc=acc:0x0<{a}>{{0}} acc.row=4 a=spm:0x0<{t}>{{{e}}} a.row={e} b=spm:0x0<{t}>{{0}}
dma.st shape[16,16] dst=dram:X+0x1000<{t}>{{{w},{e}}} src=spm:0x0<{t}>{{{r},{e}}}
host.call fn=f rd=64 wr=64 ops=1000
halt
"""


def _drive(arch) -> None:
    """Cost, compile and simulate small things on ``arch``: it must run or refuse, never crash."""
    from isa import DType
    from isa.asm import parse_program
    from npusim import simulate
    from npusim.app.driver import run_gemm

    t = DType.from_text(arch.matrix.dtypes[0])
    e = t.size
    text = PROBE.format(spm=min(arch.spm.size, 2**32 - 1), acc=min(arch.acc.size, 2**32 - 1), t=t.text, e=e,
                        r=16 * e, w=512 * e, a="f32" if t.is_float else "i32")
    program = parse_program(text)
    timing = simulate(program, arch, timing_only=True)
    values = simulate(program, arch, host_functions={"f": lambda dram: None}, **_limited())
    if values.cycles != timing.cycles:
        raise Oracle(f"probe: timing-only {timing.cycles} cycles, with values {values.cycles}")
    run_gemm(24, 40, 8, t, arch, timing_only=True)


# ---- run inputs ----------------------------------------------------------------------------------------------
def _inputs(case: Case, ctx: Context) -> Result:
    from isa.arch import load_arch

    arch = load_arch("edge16")
    if case.kind == "simulate":
        from isa.asm import parse_program
        from npusim import simulate

        from .fixtures import seed_programs

        program = parse_program(seed_programs()[0])
        values = simulate(program, arch, case.data, **_limited())
        timing = simulate(program, arch, timing_only=True)
        if values.cycles != timing.cycles:
            raise Oracle(f"timing-only {timing.cycles} cycles, with values {values.cycles}")
        return _verdict(case)
    from npusim.app.driver import run_model

    from .fixtures import tiny_graph

    graph = tiny_graph()
    _, result, _, report = run_model(graph, arch, case.data, validate=True)
    bad = [k for k, v in report["validation"].items() if not v["ok"]]
    if bad and not case.bad:
        raise Oracle(f"outputs {bad} differ from onnxruntime")
    _, timing, _, _ = run_model(graph, arch, case.data, timing_only=True)
    if timing.cycles != result.cycles:
        raise Oracle(f"timing-only {timing.cycles} cycles, with values {result.cycles}")
    return _verdict(case)


# ---- ONNX models --------------------------------------------------------------------------------------------
def onnx_inputs(m, seed: int = 0):
    """Random inputs for the graph inputs of ModelProto ``m`` that no initializer feeds, by their declared types, or
    None when a type or shape is not static."""
    from onnx import helper

    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    out = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape") or \
                not all(d.HasField("dim_value") for d in tt.shape.dim):
            return None
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, TypeError, ValueError):
            return None
        shape = tuple(d.dim_value for d in tt.shape.dim)
        if dtype.kind not in "biuf" or np.prod(shape, dtype=np.float64) > 1e7:
            return None
        data = rng.standard_normal(shape) if dtype.kind == "f" else rng.integers(-3, 4, shape)
        out[vi.name] = np.asarray(data).astype(dtype)
    return out


def ort_refuses(data: bytes, inputs) -> str | None:
    """Why onnxruntime refuses the serialized model (creating a session, or running it on ``inputs`` when there are
    some) as invalid, or None when it runs it or only lacks a kernel for an op version (NOT_IMPLEMENTED: a valid
    model that npusim may convert to a newer opset)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        if inputs is not None:
            sess.run(None, inputs)
    except Exception as e:  # noqa: BLE001 - onnxruntime's own error types
        text = " ".join(str(e).split())
        return None if "NOT_IMPLEMENTED" in text else text[:160] or type(e).__name__
    return None


def _onnx(case: Case, ctx: Context) -> Result:
    """A mutated model: onnxruntime decides whether it is valid; npusim must refuse an invalid one, and an accepted
    one must give onnxruntime's outputs and the same cycles timing-only."""
    import onnx

    from isa.arch import load_arch
    from npusim.app.driver import run_model

    m = onnx.ModelProto()
    m.ParseFromString(case.data)
    inputs = onnx_inputs(m)
    refused_by_ort = ort_refuses(case.data, inputs)
    arch = load_arch("edge16")
    _, result, _, report = run_model(m, arch, inputs, validate=refused_by_ort is None and inputs is not None,
                                     **_limited())
    if refused_by_ort is not None:
        return Result("silent", f"onnxruntime refuses it ({refused_by_ort}), npusim ran it; {case.note}")
    bad = [k for k, v in report.get("validation", {}).items() if not v["ok"]]
    if bad:
        raise Oracle(f"outputs {bad} differ from onnxruntime; {case.note}")
    _, timing, _, _ = run_model(m, arch, inputs, timing_only=True, **_limited())
    if timing.cycles != result.cycles:
        raise Oracle(f"timing-only {timing.cycles} cycles, with values {result.cycles}; {case.note}")
    return Result("accepted", case.note)


# ---- the command line ----------------------------------------------------------------------------------------
def _argv(case: Case, ctx: Context) -> list[str]:
    out = []
    for a in case.data:
        if a == "{dir}":
            a = str(ctx.dir)
        elif a.startswith("{out}"):
            a = ctx.out() + a[5:]
        elif a.startswith("{") and a.endswith("}"):
            a = ctx.files.get(a[1:-1], str(ctx.dir / "missing" / a[1:-1]))
        out.append(a)
    return out


def run_cli(argv: list[str]) -> tuple[int | None, str, str, BaseException | None]:
    """``npusim.app.cli.main(argv)`` in this process: (exit status, stdout, stderr, exception that escaped)."""
    from npusim.app.cli import main

    out, err = io.StringIO(), io.StringIO()
    code, exc = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Hang:
            raise
        except Exception as e:  # noqa: BLE001
            exc = e
    return code, out.getvalue(), err.getvalue(), exc


def cli_outcome(case: Case, code: int | None, err: str, exc: BaseException | None) -> Result:
    """Exit 0/3: accepted; 1: one line ``npusim: error: ...``; 2: usage; 70 or an escaped exception: a bug."""
    if exc is not None:
        return Result("uncaught", _where(exc))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if "Traceback" in err:
        return Result("cli", "traceback on stderr")
    if code == 70:
        return Result("uncaught", lines[-1] if lines else "exit 70")
    if code in (0, 3):
        return _verdict(case, f"exit {code}")
    if code == 1:
        if len(lines) != 1 or not lines[0].startswith("npusim: error: "):
            return Result("cli", f"exit 1 with {len(lines)} stderr lines: {err[:200]!r}")
        return Result("refused", lines[0][:200])
    if code == 2:
        if not lines or ": error: " not in lines[-1]:
            return Result("cli", f"exit 2 without an error line: {err[:200]!r}")
        return Result("refused", lines[-1][:200])
    return Result("cli", f"exit status {code!r}: {err[:200]!r}")


def _cli(case: Case, ctx: Context) -> Result:
    code, _, err, exc = run_cli(_argv(case, ctx))
    return cli_outcome(case, code, err, exc)


_RUN = {"asm": _asm, "binary": _binary, "arch": _arch, "inputs": _inputs, "onnx": _onnx, "cli": _cli}
