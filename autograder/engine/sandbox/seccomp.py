"""The system calls the notebook's process is refused (a seccomp filter, bubblewrap's `--seccomp`).

Namespaces and limits leave a few doors open to a process of the sandbox's uid, which under an
ordinary user is the instructor's own (bubblewrap's user namespaces): it could trace bubblewrap's
first process, the one whose namespaces the grader enters to run a shell command, and make it run
its own program; read the keys of the instructor's keyrings; and hold memory that RLIMIT_AS does
not count (memfd files, SysV shared memory). Each of those calls fails with EPERM. A call of
another architecture (a 32-bit `int 0x80` on x86-64, x32) fails with ENOSYS: no numbers to slip by.

The filter is classic BPF, written here (no libseccomp in the grader's Python): one program per
architecture the sandbox runs on; elsewhere `program()` is None and no filter is set.
"""

import errno
import platform
import struct

REFUSED = {  # what each call would open, and its number on x86-64 and on arm64
    "ptrace": (101, 117),             # trace bubblewrap's first process, or the grader's tools
    "process_vm_readv": (310, 270),   # the same, without ptrace
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),        # another process's files
    "keyctl": (250, 219),             # the keyrings of the grader's session and of its user
    "add_key": (248, 217),
    "request_key": (249, 218),
    "memfd_create": (319, 279),       # memory outside RLIMIT_AS
    "shmget": (29, 194),
    "bpf": (321, 280),                # the kernel's own attack surface, which NumPy never needs
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
}
ARCHITECTURES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}  # AUDIT_ARCH_*, column
X32_BIT = 0x40000000  # x86-64's x32 ABI: the same calls under other numbers

# BPF opcodes and seccomp's return values (linux/filter.h, linux/seccomp.h)
LOAD, JUMP_EQUAL, JUMP_GREATER_EQUAL, RETURN = 0x20, 0x15, 0x35, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
NUMBER, ARCH = 0, 4  # offsets in struct seccomp_data


def program(machine=None):
    """The filter's bytes (struct sock_filter[]) for `machine` (this one's by default), or None
    where the sandbox has no filter of its own."""
    machine = machine or platform.machine()
    if machine not in ARCHITECTURES:
        return None
    arch, column = ARCHITECTURES[machine]
    numbers = sorted({numbers[column] for numbers in REFUSED.values()})
    # 0: the architecture; 2: the call's number; then one test per refused call; the returns last
    checks = [(JUMP_GREATER_EQUAL, X32_BIT)] if machine == "x86_64" else []
    checks += [(JUMP_EQUAL, number) for number in numbers]
    allow = 3 + len(checks)
    refuse, other = allow + 1, allow + 2
    code = [(LOAD, 0, 0, ARCH), (JUMP_EQUAL, 0, other - 2, arch), (LOAD, 0, 0, NUMBER)]
    for pc, (op, value) in enumerate(checks, start=3):
        code.append((op, (other if op == JUMP_GREATER_EQUAL else refuse) - pc - 1, 0, value))
    code += [(RETURN, 0, 0, ALLOW), (RETURN, 0, 0, ERRNO | errno.EPERM), (RETURN, 0, 0, ERRNO | errno.ENOSYS)]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)
