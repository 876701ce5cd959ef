"""Benchmark harness: ``make bench`` (``python -m bench``)."""
