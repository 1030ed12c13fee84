#!/usr/bin/env python3
"""A client that forges its identity, written on raw ZMTP 3.0 with Python's socket module alone.

No libzmq and no pyzmq: the greeting, the NULL mechanism's READY command and the frames are
written here from ZeroMQ RFC 23 (ZMTP 3.0) and RFC 37 (ZMTP 3.1, whose NULL handshake is the
same), and the message from docs/wire-format.md. In its READY command the peer offers, beside
the Socket-Type a port's ROUTER expects ("DEALER"), a "User-Id" (a well-formed CURVE key it
does not hold, --user-id) and a "Peer-Address" (--peer-address, the shape libzmq gives an ipc
connection: host:uid:gid:pid) that are not its own. libzmq copies such properties into the
connection's metadata, where a port must not take them for the sender.

It connects to --endpoint (tcp://host:port or ipc://path), makes one request (message 9,
correlation id 0x55, one data component: --text) and prints the reply's text on one line:

    reply <text>

then exits 0. Anything else (no answer within 20 s, a malformed reply): a message on stderr
and exit status 1.

Usage: zmtp_forger.py --endpoint E --text T --user-id K --peer-address A
"""

import argparse
import socket
import struct
import sys

MAGIC, VERSION, KIND_REQUEST, KIND_REPLY = b"RLK", 3, 1, 2
DATA = 0
HEADER = struct.Struct("<3sBBBHiQH")  # magic, version, kind, flags, N, message id, correlation id, R
ENTRY = struct.Struct("<BI")          # a component table entry: kind, length
TIMEOUT_S = 20

# ZMTP frame flags (RFC 23, "Framing"): MORE, LONG (8-byte size), COMMAND.
MORE, LONG, COMMAND = 0x01, 0x02, 0x04


def greeting():
    """The 64-byte ZMTP 3.0 greeting: signature, version 3.0, mechanism NULL, as-server 0, filler."""
    signature = b"\xff" + b"\x00" * 8 + b"\x7f"
    return signature + bytes([3, 0]) + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31


def frame(body, flags=0):
    """One ZMTP frame: flags, size (one byte, or eight with LONG), body."""
    if len(body) > 255:
        return bytes([flags | LONG]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def ready(properties):
    """The NULL mechanism's READY command with `properties` (name, value) in order."""
    body = bytes([5]) + b"READY"
    for name, value in properties:
        body += bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
    return frame(body, COMMAND)


def read_exactly(connection, count):
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            sys.exit(f"the port closed the connection after {len(data)} of {count} bytes")
        data += chunk
    return data


def read_frame(connection):
    """(flags, body) of the next ZMTP frame."""
    flags, = read_exactly(connection, 1)
    size = struct.unpack(">Q", read_exactly(connection, 8))[0] if flags & LONG else read_exactly(connection, 1)[0]
    return flags, read_exactly(connection, size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--user-id", required=True)
    parser.add_argument("--peer-address", required=True)
    args = parser.parse_args()

    if args.endpoint.startswith("tcp://"):
        host, _, port = args.endpoint[len("tcp://"):].rpartition(":")
        connection = socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S)
    elif args.endpoint.startswith("ipc://"):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(TIMEOUT_S)
        connection.connect(args.endpoint[len("ipc://"):])
    else:
        sys.exit(f"not a tcp or ipc endpoint: {args.endpoint}")

    connection.sendall(greeting())
    theirs = read_exactly(connection, 64)
    if theirs[0] != 0xFF or theirs[9] != 0x7F or theirs[10] != 3 or theirs[12:16] != b"NULL":
        sys.exit(f"not a ZMTP 3 NULL greeting: {theirs!r}")
    connection.sendall(ready([
        (b"Socket-Type", b"DEALER"),
        (b"User-Id", args.user_id.encode()),
        (b"Peer-Address", args.peer_address.encode()),
    ]))
    flags, command = read_frame(connection)
    if not flags & COMMAND or command[:6] != b"\x05READY":
        sys.exit(f"expected the port's READY, got {command!r}")

    # A DEALER sends the message frame alone; the port's ROUTER puts the routing id before it.
    text = args.text.encode()
    request = HEADER.pack(MAGIC, VERSION, KIND_REQUEST, 0, 1, 9, 0x55, 0) + ENTRY.pack(DATA, len(text)) + text
    connection.sendall(frame(request))

    frames = []
    while True:
        flags, body = read_frame(connection)
        if flags & COMMAND:
            continue  # a PING or other command: not part of a message
        frames.append(body)
        if not flags & MORE:
            break
    if len(frames) != 1 or len(frames[0]) < HEADER.size + ENTRY.size:
        sys.exit(f"malformed reply: {frames!r}")
    header = HEADER.unpack_from(frames[0])
    if header != (MAGIC, VERSION, KIND_REPLY, 0, 1, 9, 0x55, 0):
        sys.exit(f"unexpected reply header: {header!r}")
    kind, length = ENTRY.unpack_from(frames[0], HEADER.size)
    data = frames[0][HEADER.size + ENTRY.size:]
    if kind != DATA or len(data) != length:
        sys.exit(f"malformed reply: {frames!r}")
    print(f"reply {data.decode()}", flush=True)
    connection.close()


if __name__ == "__main__":
    main()
