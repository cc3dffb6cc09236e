"""What every engine adapter shares at the engine boundary, written once: the finish rule (``finish``: where a
completion ends, what is cut, what an early stop is) and the draw pool (``draw_pool``: worker processes for a
decoder's ``sample()``). Nothing is imported here; each module imports no engine.
"""
