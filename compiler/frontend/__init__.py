"""The front end: ONNX import, the Python graph builder, canonical forms, operand contracts."""
