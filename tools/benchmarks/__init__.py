"""Benchmark harnesses behind ``tools/benchmark.py`` (worker processes, allocator settings); not part of ``zoo``."""
