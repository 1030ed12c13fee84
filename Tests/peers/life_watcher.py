#!/usr/bin/env python3
"""A watcher of a named port's life page, written from docs/wire-format.md ("Where named
ports live", NAME.life) with the standard library alone: no RunLoopKit, no pyzmq.

It maps --runtime-dir/--name.life, checks its magic, version and that it names --pid (the
owner's pid, as the name's lock file says), sets FUTEX_WAITERS in the robust lock's word
atomically (FUTEX_WAKE_OP's OR: a plain store could erase the kernel's death mark), and
sleeps on the word until the page is no longer live. It prints, one line each, flushed:
    ready               once it sleeps on the word
    given back          the owner withdrew the port (state 2)
    died                the owner's thread ended holding the lock (FUTEX_OWNER_DIED)
and wakes every other sleeper of the word before it exits (the kernel wakes one). Exit
status 0; 2 if the page is missing or not the owner's.

Usage: life_watcher.py --runtime-dir DIR --name NAME --pid PID
"""

import argparse
import ctypes
import mmap
import os
import platform
import struct
import sys

OWNER_DIED, WAITERS, THREAD_MASK = 0x40000000, 0x80000000, 0x3FFFFFFF
FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAKE_OP = 0, 1, 5
# FUTEX_OP(FUTEX_OP_OR | FUTEX_OP_OPARG_SHIFT, 31, FUTEX_OP_CMP_EQ, 0): *word |= 1 << 31
OR_WAITERS = ((1 | 8) << 28) | (31 << 12)
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}[platform.machine()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runtime-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--pid", type=int, required=True)
    arguments = parser.parse_args()

    try:
        fd = os.open(f"{arguments.runtime_dir}/{arguments.name}.life", os.O_RDWR)
    except FileNotFoundError:
        print("no page", flush=True)
        return 2
    page = mmap.mmap(fd, 4096)
    os.close(fd)
    magic, version, _, pid = struct.unpack_from("<4sIII", page, 64)
    if magic != b"RLKL" or version != 1 or pid != arguments.pid:
        print("not the owner's page", flush=True)
        return 2

    word = ctypes.c_uint32.from_buffer(page, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    address = ctypes.addressof(word)

    def futex(operation, value, address2=None, value3=0):
        return libc.syscall(ctypes.c_long(SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_int(operation),
                            ctypes.c_uint32(value), None, ctypes.c_void_p(address2), ctypes.c_uint32(value3))

    announced = False
    while True:
        state, = struct.unpack_from("<I", page, 72)
        seen = word.value
        if state == 2 or seen & OWNER_DIED or seen & THREAD_MASK == 0:
            break
        if not seen & WAITERS:
            futex(FUTEX_WAKE_OP, 0, address, OR_WAITERS)  # wakes nobody; ORs the bit in
            continue
        if not announced:
            print("ready", flush=True)
            announced = True
        futex(FUTEX_WAIT, seen)
    futex(FUTEX_WAKE, 0x7FFFFFFF)
    print("given back" if state == 2 else "died", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
