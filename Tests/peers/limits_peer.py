#!/usr/bin/env python3
"""A peer on raw ZMTP 3.0 (Python's socket module, no libzmq) for docs/security.md's
"Bounded peers" tests. It connects to a RunLoopKit port at --host/--port over tcp and:

    silent            sends nothing at all, and waits for the port to close the connection;
    oversized SIZE    completes the NULL handshake as a DEALER, then announces a message
                      frame of SIZE bytes (its header only), and waits for the port to close
                      the connection, which a port whose frame limit is below SIZE does at once.

It prints one line, then exits 0:

    closed <seconds>  the port closed the connection (end of file or a reset), that long
                      after the connection was made (silent) or the frame announced;
    open              the connection was still open after --wait seconds.

Anything else (no connection): a message on stderr and exit status 1.

Usage: limits_peer.py --host H --port P --wait SECONDS (silent | oversized SIZE)
"""

import argparse
import select
import socket
import struct
import sys
import time


def greeting():
    """ZMTP 3.0's greeting: signature, version 3.0, mechanism NULL, as-server 0, filler."""
    return b"\xff" + bytes(8) + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\x00") + b"\x00" + bytes(31)


def command(name, body):
    """A short command frame (flags 0x04): the name's length and name, then the body."""
    payload = bytes([len(name)]) + name + body
    return bytes([0x04, len(payload)]) + payload


def wait_for_close(connection, seconds):
    """Reads (and discards) until the peer closes; the time it took, or None if still open."""
    start = time.monotonic()
    deadline = start + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        readable, _, _ = select.select([connection], [], [], left)
        if not readable:
            continue
        try:
            if not connection.recv(65536):
                return time.monotonic() - start
        except ConnectionResetError:
            return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--wait", type=float, required=True)
    parser.add_argument("mode", choices=["silent", "oversized"])
    parser.add_argument("size", type=int, nargs="?")
    args = parser.parse_args()

    connection = socket.create_connection((args.host, args.port), timeout=10)
    connection.settimeout(None)
    if args.mode == "oversized":
        connection.sendall(greeting())
        # READY with the one property ZMTP requires; libzmq checks the socket types match.
        connection.sendall(command(b"READY", bytes([11]) + b"Socket-Type" + struct.pack(">I", 6) + b"DEALER"))
        # A message frame's header only: flags 0x02 (long, last frame), then its 8-byte size.
        connection.sendall(bytes([0x02]) + struct.pack(">Q", args.size))
    took = wait_for_close(connection, args.wait)
    print("open" if took is None else "closed %.3f" % took, flush=True)
    connection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
