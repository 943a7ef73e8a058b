"""Reports of a run: time splits, Perfetto traces, plots and tables."""
