"""The mult_cpu study: 3x3 and 4x4 multiplication internalized on a 2-core CPU (README.md)."""
