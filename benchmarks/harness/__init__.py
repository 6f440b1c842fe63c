"""The shared benchmark harness: local brokers and records, process-tree CPU and memory,
landing and latency measurement, the hand-written baselines, treedist as a subprocess, and
results files. Each scenario in `benchmarks/` is a small module on top of it."""
