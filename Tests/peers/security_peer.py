#!/usr/bin/env python3
"""A client process for docs/security.md's tests, written with pyzmq from docs/wire-format.md.

It makes one request (message 9, correlation id 0x55, one data component: --text) of a
RunLoopKit port at --endpoint from a DEALER socket, as a CURVE client with its own long-term
key pair when --server-key is given, and prints what happened on one line:

    reply <text>        the port answered (its reply's first data component)
    refused <status>    the port's ZAP handler refused the handshake (the client's socket
                        monitor saw ZMQ_EVENT_HANDSHAKE_FAILED_AUTH with that status)
    handshake failed    the handshake failed without a status (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
                        or _PROTOCOL): for example the port's key is not --server-key

then exits 0. Anything else (no answer within 20 s, a malformed reply): a message on
stderr and exit status 1. Every wait is bounded, so the peer never hangs.

Usage: security_peer.py --endpoint E --text T [--server-key K --public-key P --secret-key S]
"""

import argparse
import struct
import sys

import zmq
from zmq.utils.monitor import recv_monitor_message

MAGIC, VERSION, KIND_REQUEST, KIND_REPLY = b"RLK", 3, 1, 2
DATA, ALONE = 0, 2  # component kinds: data in the message frame, data in a frame of its own
# The message frame: magic, version, kind, flags, component count, message id, correlation id,
# reply port length (22 bytes), then one table entry (kind, length: 5 bytes) per component,
# the reply port and the inline components' bytes.
HEADER = struct.Struct("<3sBBBHiQH")
ENTRY = struct.Struct("<BI")
TIMEOUT_MS = 20_000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--server-key")
    parser.add_argument("--public-key")
    parser.add_argument("--secret-key")
    parser.add_argument("--burst", type=int, default=0,
                        help="plain messages (kind 0, id 8) to send back to back before the request")
    args = parser.parse_args()

    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    dealer.linger = 0
    if args.server_key:
        dealer.curve_serverkey = args.server_key.encode()
        dealer.curve_publickey = args.public_key.encode()
        dealer.curve_secretkey = args.secret_key.encode()
    monitor = dealer.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                                        | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
    dealer.connect(args.endpoint)
    text = args.text.encode()  # inline: the request is one frame
    for _ in range(args.burst):
        dealer.send(HEADER.pack(MAGIC, VERSION, 0, 0, 1, 8, 0, 0) + ENTRY.pack(DATA, len(text)) + text)
    dealer.send(HEADER.pack(MAGIC, VERSION, KIND_REQUEST, 0, 1, 9, 0x55, 0) + ENTRY.pack(DATA, len(text)) + text)

    poller = zmq.Poller()
    poller.register(dealer, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    ready = dict(poller.poll(TIMEOUT_MS))
    if monitor in ready:
        event = recv_monitor_message(monitor)
        if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            print(f"refused {event['value']}", flush=True)
        else:
            print("handshake failed", flush=True)
    elif dealer in ready:
        frames = dealer.recv_multipart()
        if len(frames) not in (1, 2) or len(frames[0]) < HEADER.size + ENTRY.size:
            sys.exit(f"malformed reply: {frames!r}")
        magic, version, kind, flags, count, msgid, correlation, reply_port = HEADER.unpack_from(frames[0])
        if (magic, version, kind, flags, count, msgid, correlation, reply_port) != (
                MAGIC, VERSION, KIND_REPLY, 0, 1, 9, 0x55, 0):
            sys.exit(f"unexpected reply header: {frames[0]!r}")
        # One data component: inline, or (64 KiB or more) alone in frame 1.
        component_kind, length = ENTRY.unpack_from(frames[0], HEADER.size)
        alone = component_kind == ALONE
        data = frames[1] if alone and len(frames) == 2 else frames[0][HEADER.size + ENTRY.size:]
        frame_size = HEADER.size + ENTRY.size + (0 if alone else length)
        if component_kind not in (DATA, ALONE) or len(frames) != 1 + alone or len(data) != length \
                or len(frames[0]) != frame_size:
            sys.exit(f"malformed reply: {frames!r}")
        print(f"reply {data.decode()}", flush=True)
    else:
        sys.exit(f"no reply and no refusal from {args.endpoint} within {TIMEOUT_MS} ms")
    dealer.disable_monitor()
    monitor.close(0)
    dealer.close(0)
    context.term()


if __name__ == "__main__":
    main()
