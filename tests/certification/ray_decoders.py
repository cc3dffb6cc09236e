"""Doubles for tests/certification/test_ray.py: the reference decoder, which on its first sampled call of a run
writes the pids of its process and of that process's parent to a file, then pauses, so the test can SIGKILL the Ray
worker while a part is running; and factories declaring Ray resources. The mark is made once per file (``open(...,
"x")``), so the retried part runs through. Marking changes no draw: counts are the reference's."""

import os
import signal
import time

from specverify.reference import VectorizedDecoder

PAUSE_S = 3.0  # long enough for the test's watcher to see the mark and kill the worker mid-part


class _Marking(VectorizedDecoder):
    mark = None

    def _once(self):
        try:
            with open(self.mark, "x") as fh:
                fh.write(f"{os.getpid()} {os.getppid()}\n")
        except FileExistsError:
            return
        time.sleep(PAUSE_S)

    def sample(self, request, n, start=0):
        self._once()
        return super().sample(request, n, start=start)


def marking_reference(target, draft, mark):
    decoder = _Marking(target, draft)
    decoder.mark = mark
    return decoder


def cpu_reference(target, draft):
    return VectorizedDecoder(target, draft)


cpu_reference.ray_resources = {"num_cpus": 1}


def negative_gpus_reference(target, draft):
    return VectorizedDecoder(target, draft)


negative_gpus_reference.ray_resources = {"num_gpus": -1}  # malformed: a count below 0


class _Killing(VectorizedDecoder):
    """SIGKILLs a process on every sampled call: its own (``who="self"``) or its parent's (``"parent"``)."""

    who = "self"

    def sample(self, request, n, start=0):
        os.kill(os.getpid() if self.who == "self" else os.getppid(), signal.SIGKILL)
        time.sleep(60)  # the parent's death reaches this process too: never answer


def killing_reference(target, draft, who):
    decoder = _Killing(target, draft)
    decoder.who = who
    return decoder
