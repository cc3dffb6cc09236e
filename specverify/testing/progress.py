"""Progress inside a long item: a line every few seconds while a marker item certifies its scenario.

An item of a slow engine certifies for minutes (engine start, a thorough level's N, sequential looks) and pytest
shows nothing until it ends. :class:`Heartbeat` prints, every ``interval`` seconds from the item's start, one line:
the item, how long it has run and the certifier's last progress message (``[1/1] temperature-1``).
Quick items print nothing. The lines come from a thread, while the test's own thread waits on the certification
(which writes nothing to the terminal itself); under xdist a worker's terminal is not shown, so there is none.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable, Optional

__all__ = ["Heartbeat"]


class Heartbeat:
    """``with Heartbeat(write, label, interval) as beat: certify(..., progress=beat.progress)``: ``write(line)``
    every ``interval`` seconds (> 0) until the block ends."""

    def __init__(self, write: Callable[[str], None], label: str, interval: float):
        self.write, self.label, self.interval = write, label, interval
        self.last: Optional[str] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="specverify-progress", daemon=True)
        self._started = time.perf_counter()

    def progress(self, message: str) -> None:
        """The certifier's progress callback: remembered for the next line."""
        # the message's own "(elapsed …)" is the time at the step's start: the line says the time now instead
        self.last = re.sub(r" \(elapsed [^)]*\)$", "", message.removeprefix("specverify: "))

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            elapsed = time.perf_counter() - self._started
            tail = f" — {self.last}" if self.last else ""
            self.write(f"specverify: {self.label} still certifying after {elapsed:.0f} s{tail}")

    def __enter__(self) -> Heartbeat:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
