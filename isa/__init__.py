"""npusim's instruction set: the one contract between the compiler and the simulator."""

from isa.dtypes import INT_RANGE, DType, Space
from isa.errors import (
    ArchError,
    AsmSyntaxError,
    DeadlockError,
    EncodingError,
    InputError,
    IsaError,
    LimitError,
    NpuSimError,
    SimulationError,
    VerifyError,
)
from isa.instructions import (
    Act,
    Barrier,
    BinOp,
    DmaCopy,
    DmaFill,
    Gather,
    Halt,
    HostCall,
    Instr,
    MatMul,
    Opcode,
    Pad,
    Reduce,
    SemOp,
    Sync,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    reduction_dims,
)
from isa.program import Program, ProgramConfig, Region, SemDecl
from isa.units import UNIT_QUEUES, Queue
from isa.view import View

__all__ = [
    "Act", "ArchError", "AsmSyntaxError", "Barrier", "BinOp", "DType", "DeadlockError", "DmaCopy", "DmaFill",
    "EncodingError", "Gather", "Halt", "HostCall", "INT_RANGE", "InputError", "Instr", "IsaError", "LimitError",
    "MatMul", "NpuSimError", "Opcode", "Pad", "Program", "ProgramConfig", "Queue", "Reduce", "Region", "SemDecl",
    "SemOp", "SimulationError", "Space", "Sync", "UNIT_QUEUES", "VecBinary", "VecConvert", "VecRequant", "VecUnary",
    "VerifyError", "View", "reduction_dims",
]
