#!/usr/bin/env python3
"""Requesters that die mid-request, written from docs/wire-format.md with pyzmq alone.

Opens CONNECTIONS DEALER sockets to ENDPOINT (a RunLoopKit port), sends one request on
each (kind 1, message id 1, correlation id 1..CONNECTIONS, no components: the 22-byte
header alone), prints "sent CONNECTIONS" once every request is on its way, then waits
to be killed (the test sends SIGKILL: no socket is closed, the kernel ends every
connection at once). Never answers, never exits by itself before 120 s.

Usage: dying_clients.py --endpoint ipc:///path/name.sock --connections N
"""

import argparse
import signal
import struct
import sys
import time

import zmq


def request_frame(correlation_id: int) -> bytes:
    # magic "RLK", version 3, kind 1 (request), flags 0, N = 0 components, message id 1,
    # the correlation id, reply port length 0.
    return b"RLK" + bytes([3, 1, 0]) + struct.pack("<HiQH", 0, 1, correlation_id, 0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--connections", type=int, required=True)
    args = parser.parse_args()
    context = zmq.Context()
    sockets = []
    for index in range(args.connections):
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(args.endpoint)
        sockets.append(dealer)
    for index, dealer in enumerate(sockets):
        if not dealer.poll(10_000, zmq.POLLOUT):
            print(f"connection {index} never became writable", file=sys.stderr)
            return 1
        dealer.send(request_frame(index + 1))
    print(f"sent {args.connections}", flush=True)
    signal.alarm(120)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
