"""The decoder under test during a run: its factory, its worker process, the draws and their protocol checks, the
α plan and the budget every check reads."""
