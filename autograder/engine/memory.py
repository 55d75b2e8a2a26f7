"""A process's memory as the limits see it: its address space (VmSize).

Standard library only (NumPy when asked to reserve BLAS's buffer): this file is also
copied into the sandbox, where the runner imports it. Linux only.
"""


def address_space(blas_ready=False):
    """This process's address space in bytes (VmSize). `blas_ready`: once BLAS has its work
    buffer (the first matrix product reserves it, 32 MiB), which must not count against a
    limit set from this size."""
    if blas_ready:
        import numpy
        square = numpy.ones((300, 300))
        square @ square.T
        del square
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0
