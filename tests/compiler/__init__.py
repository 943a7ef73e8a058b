"""Tests of the compiler front: IR, ONNX import, builder, constant folding, model zoo."""
