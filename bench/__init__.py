"""The benchmarks, each run by path (python bench/<name>.py); a package so the tests import their pure parts."""
