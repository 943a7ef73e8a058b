"""The application layer, the only place that joins the compiler and the simulator: driver, CLI, golden traces, ONNX
backend, conformance, sweeps, benches, the model zoo."""
