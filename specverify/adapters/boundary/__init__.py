"""What every engine adapter shares at the engine boundary, written once: the finish rule (``finish``: where a
completion ends, what is cut, what an early stop is), the draw pool (``draw_pool``: worker processes for a
decoder's ``sample()``), the checkpoint directory a converting adapter needs (``checkpoints``) and the checkpoint
models as GGUF files (``gguf_export``: llama.cpp's adapter, the server adapter's ``{target_gguf}`` placeholder and
the model bundle use them). Nothing is imported here; each module imports no engine.
"""
