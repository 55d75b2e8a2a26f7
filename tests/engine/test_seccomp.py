"""The seccomp filter's program, run by a small BPF interpreter of the test's own for each
architecture it is written for (the sandbox tests run it for real on this machine's)."""

import errno
import struct

import pytest

from autograder.engine.sandbox import seccomp


def verdict(program, arch, number):
    """What `program` returns for the call `number` of architecture `arch` (classic BPF: loads of
    struct seccomp_data, jumps, returns)."""
    code = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data, pc, accumulator = {seccomp.NUMBER: number, seccomp.ARCH: arch}, 0, 0
    while True:
        op, jump_true, jump_false, value = code[pc]
        if op == seccomp.LOAD:
            accumulator, pc = data[value], pc + 1
        elif op in (seccomp.JUMP_EQUAL, seccomp.JUMP_GREATER_EQUAL):
            taken = accumulator == value if op == seccomp.JUMP_EQUAL else accumulator >= value
            pc += 1 + (jump_true if taken else jump_false)
        else:
            assert op == seccomp.RETURN
            return value


REFUSED, ALLOWED, NOT_THIS_ARCH = (seccomp.ERRNO | errno.EPERM, seccomp.ALLOW, seccomp.ERRNO | errno.ENOSYS)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHITECTURES))
def test_each_refused_call_is_refused_and_the_others_allowed(machine):
    program = seccomp.program(machine)
    arch, column = seccomp.ARCHITECTURES[machine]
    refused = {numbers[column] for numbers in seccomp.REFUSED.values()}
    assert all(verdict(program, arch, number) == REFUSED for number in refused)
    assert all(verdict(program, arch, number) == ALLOWED for number in range(460) if number not in refused)


def test_calls_of_another_architecture_or_of_x32_are_refused():
    program = seccomp.program("x86_64")
    assert verdict(program, 0x40000003, 26) == NOT_THIS_ARCH  # i386's ptrace, by int 0x80
    assert verdict(program, seccomp.ARCHITECTURES["x86_64"][0], 0x40000000 + 0) == NOT_THIS_ARCH  # x32's read
    assert seccomp.program("riscv64") is None  # no table: no filter
