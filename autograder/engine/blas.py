"""How many threads BLAS may use in the grader's processes (threadpoolctl).

A batch's workers share the machine's cores: each worker's BLAS gets its share, so that N
workers never run N × cores threads. The reference answering a stand-in gets one thread, as the
student's code has in its sandbox (`sandbox.answers`)."""

import os

from threadpoolctl import ThreadpoolController

_CONTROLLER = []  # found once per process: finding the loaded BLAS libraries takes a while


def share(workers):
    """The BLAS threads of each of `workers` grading processes."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def limited(threads):
    """Cap BLAS at `threads` threads in this process, from now on; as a context, until it ends."""
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=threads, user_api="blas")


def threads():
    """The threads BLAS uses now in this process (the largest, should several BLAS be loaded)."""
    return max((pool.num_threads for pool in ThreadpoolController().select(user_api="blas").lib_controllers),
               default=1)
