"""Benchmarks: MemTraceBench (building, fault injection, labels, scoring) and benchmark scripts."""
