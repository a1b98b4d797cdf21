"""Benchmarks that measure what the judge computes against a real server (not part of the package)."""
