"""A stand-in engine package: replace ``my_engine`` with your engine; keep ``adapter.py``'s shape."""
