#!/usr/bin/env python3
"""A RunLoopKit peer written in Python with pyzmq, from docs/wire-format.md alone.

It plays the worker of the guide's check-in (Listings 3-16 to 3-19) against a named
RunLoopKit port, then makes a request of it:

1. binds its own port, a ROUTER socket at ipc://DIR/<worker-name>.sock;
2. checks in: sends message 100 to ipc://DIR/<main-name>.sock from a DEALER socket, with
   one port component (its own address) and its own address as the reply port;
3. waits for the job (message 1, one data component) and answers with message 2, the
   job's bytes upper-cased;
4. sends a request (message 7, correlation id 0x1234, data b"ping") on the DEALER and
   reads the reply from the same socket (kind 2, same correlation id, the request's
   message id, data b"pong:ping"); then the same request from a REQ socket, whose
   empty delimiter frame the port sends back with the reply;
   then a request (message 9, data b"fail") whose handler throws: the port answers with a
   failure (kind 3, same correlation id and message id, one data component: the reason);
5. sends message 3, b"done", prints a one-line summary and exits 0.

Any protocol violation or timeout: a message on stderr and exit status 1. Every wait
and every send is bounded, so the peer never hangs.

Usage: pyzmq_peer.py --runtime-dir DIR --main-name NAME --worker-name NAME
"""

import argparse
import os
import struct
import sys
from typing import NamedTuple

import zmq

# --- The wire format, version 3 (docs/wire-format.md) -----------------------------

MAGIC = b"RLK"
VERSION = 3
KIND_MESSAGE, KIND_REQUEST, KIND_REPLY, KIND_FAILURE = 0, 1, 2, 3
DATA, PORT, ALONE = 0, 1, 2  # component kinds: data inline, port inline, data in a frame of its own
ALONE_FROM = 64 * 1024  # a data component this large or larger travels in a frame of its own

# The message frame (frame 0) starts with magic, version, kind, flags, component count N,
# message id, correlation id, reply port length R: all little-endian, 22 bytes; then the
# component table (N entries of kind and length, 5 bytes each), the reply port's R bytes
# and the inline components' bytes in table order.
HEADER = struct.Struct("<3sBBBHiQH")
ENTRY = struct.Struct("<BI")
assert (HEADER.size, ENTRY.size) == (22, 5)

MAX_COMPONENTS = 1024
MAX_FRAME_BYTES = 64 << 20
MAX_ADDRESS_BYTES = 1024


class ProtocolError(Exception):
    """The Swift side sent something the wire format does not allow, or nothing."""


class Message(NamedTuple):
    kind: int
    msgid: int
    correlation: int
    reply_address: bytes  # b"" for none
    components: list  # (DATA or PORT, bytes)


def encode(kind, msgid, components, reply_address=b"", correlation=0):
    """The frames of a message: the message frame, then each data component of 64 KiB or
    more in a frame of its own."""
    table, inline, alone = [], [], []
    for component_kind, value in components:
        if component_kind == DATA and len(value) >= ALONE_FROM:
            table.append(ENTRY.pack(ALONE, len(value)))
            alone.append(value)
        else:
            table.append(ENTRY.pack(component_kind, len(value)))
            inline.append(value)
    header = HEADER.pack(MAGIC, VERSION, kind, 0, len(components), msgid, correlation, len(reply_address))
    return [header + b"".join(table) + reply_address + b"".join(inline)] + alone


def decode(frames):
    """Checks every rule of the format a receiver must check, in the document's order, and
    returns the Message."""
    if not frames:
        raise ProtocolError("no frames")
    frame = frames[0]
    if len(frame) < 4:
        raise ProtocolError(f"message frame of {len(frame)} bytes")
    if frame[:3] != MAGIC:
        raise ProtocolError(f"bad magic {frame[:3]!r}")
    if frame[3] != VERSION:
        raise ProtocolError(f"unsupported version {frame[3]}")
    if len(frame) < HEADER.size:
        raise ProtocolError(f"message frame of {len(frame)} bytes; at least {HEADER.size} expected")
    _, _, kind, flags, count, msgid, correlation, reply_length = HEADER.unpack_from(frame)
    if kind not in (KIND_MESSAGE, KIND_REQUEST, KIND_REPLY, KIND_FAILURE):
        raise ProtocolError(f"unknown kind {kind}")
    if flags != 0:
        raise ProtocolError(f"nonzero flags {flags:#x}")
    if count > MAX_COMPONENTS:
        raise ProtocolError(f"{count} components, more than {MAX_COMPONENTS}")
    table_end = HEADER.size + ENTRY.size * count
    if len(frame) < table_end:
        raise ProtocolError(f"message frame of {len(frame)} bytes for a table of {count} entries")
    entries = [ENTRY.unpack_from(frame, HEADER.size + ENTRY.size * index) for index in range(count)]
    for index, (component_kind, _) in enumerate(entries):
        if component_kind not in (DATA, PORT, ALONE):
            raise ProtocolError(f"component {index} has unknown kind {component_kind}")
    expected = table_end + reply_length + sum(length for kind_, length in entries if kind_ != ALONE)
    if len(frame) != expected:
        raise ProtocolError(f"message frame of {len(frame)} bytes where its table adds up to {expected}")
    alone_count = sum(1 for kind_, _ in entries if kind_ == ALONE)
    if len(frames) != 1 + alone_count:
        raise ProtocolError(f"{len(frames)} frames for {alone_count} component(s) alone")
    for index, value in enumerate(frames):
        if len(value) > MAX_FRAME_BYTES:
            raise ProtocolError(f"frame {index} of {len(value)} bytes")
    reply_address = frame[table_end:table_end + reply_length]
    if reply_address:
        check_address(reply_address)
    components = []
    offset = table_end + reply_length  # the next inline component
    lone = 1  # the frame of the next component alone
    for component_kind, length in entries:
        if component_kind == ALONE:
            value = frames[lone]
            lone += 1
            if len(value) != length:
                raise ProtocolError(f"a component of {len(value)} bytes where the table says {length}")
            components.append((DATA, value))
        else:
            value = frame[offset:offset + length]
            offset += length
            components.append((component_kind, value))
    for component_kind, value in components:
        if component_kind == PORT:
            check_address(value)
    return Message(kind, msgid, correlation, reply_address, components)


def check_address(address):
    try:
        text = address.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"address {address!r} is not UTF-8") from None
    if not 1 <= len(address) <= MAX_ADDRESS_BYTES or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ProtocolError(f"invalid address {address!r}")
    if not any(text.startswith(scheme) and len(text) > len(scheme)
               for scheme in ("inproc://", "ipc://", "tcp://")):
        raise ProtocolError(f"address {address!r} has no inproc/ipc/tcp endpoint")


# --- The peer ---------------------------------------------------------------------

TIMEOUT_MS = 20_000
CORRELATION = 0x1234
EXPECTED_REPLY = b"pong:ping"
EXPECTED_FAILURE = b"job refused: fail"


def receive(socket, what, routed=False):
    """The next message on a socket, within TIMEOUT_MS. On our port (a ROUTER socket,
    routed) the sender's routing id comes first, then an empty delimiter if the sender
    was a REQ socket."""
    if not socket.poll(TIMEOUT_MS, zmq.POLLIN):
        raise ProtocolError(f"timed out after {TIMEOUT_MS} ms waiting for {what}")
    frames = socket.recv_multipart(zmq.NOBLOCK)
    if routed:
        frames = frames[1:]
        if frames and frames[0] == b"":
            frames = frames[1:]
    return decode(frames)


def check_reply(reply, what):
    expect(reply.kind == KIND_REPLY, f"{what}: kind {reply.kind}, not {KIND_REPLY}")
    expect(reply.correlation == CORRELATION,
           f"{what}: correlation id {reply.correlation:#x}, not {CORRELATION:#x}")
    expect(reply.msgid == 7, f"{what}: message id {reply.msgid}, not the request's (7)")
    expect(reply.reply_address == b"", f"{what}: a reply port {reply.reply_address!r}")
    expect(reply.components == [(DATA, EXPECTED_REPLY)],
           f"{what}: components {reply.components!r}, not [data {EXPECTED_REPLY!r}]")


def expect(condition, problem):
    if not condition:
        raise ProtocolError(problem)


def run(own_path, main_path, ctx):
    own_address = f"ipc://{own_path}".encode()
    main_address = f"ipc://{main_path}"

    # 1. Our port: a bound ROUTER socket.
    port = ctx.socket(zmq.ROUTER)
    port.linger = 0
    port.bind(own_address.decode())

    # Sending to the Swift port: a DEALER socket connected to its address. Sends give up
    # after TIMEOUT_MS; on an error, what is still queued is dropped at once (linger 0).
    dealer = ctx.socket(zmq.DEALER)
    dealer.linger = 0
    dealer.sndtimeo = TIMEOUT_MS
    dealer.connect(main_address)

    # 2. The check-in: our port as a port component, and as the reply port.
    dealer.send_multipart(encode(KIND_MESSAGE, 100, [(PORT, own_address)], reply_address=own_address))

    # 3. The job, and our answer.
    job = receive(port, "the job (message 1)", routed=True)
    expect(job.kind == KIND_MESSAGE, f"job has kind {job.kind}, not {KIND_MESSAGE}")
    expect(job.msgid == 1, f"job has message id {job.msgid}, not 1")
    expect(job.correlation == 0, f"plain message with correlation id {job.correlation}")
    expect([kind for kind, _ in job.components] == [DATA], "job must have exactly one data component")
    job_data = job.components[0][1]
    dealer.send_multipart(encode(KIND_MESSAGE, 2, [(DATA, job_data.upper())]))

    # 4. A request; its reply comes back over the same connection, to the same socket.
    dealer.send_multipart(encode(KIND_REQUEST, 7, [(DATA, b"ping")], correlation=CORRELATION))
    check_reply(receive(dealer, "the reply to request 7"), "the reply on the DEALER")
    # The same from a REQ socket (which adds, and strips, the empty delimiter frame).
    req = ctx.socket(zmq.REQ)
    req.linger = 0
    req.sndtimeo = TIMEOUT_MS
    req.connect(main_address)
    req.send_multipart(encode(KIND_REQUEST, 7, [(DATA, b"ping")], correlation=CORRELATION))
    check_reply(receive(req, "the reply to request 7 from a REQ socket"), "the reply on the REQ")
    req.close()
    # A request whose handler throws: a failure comes back in place of the reply.
    dealer.send_multipart(encode(KIND_REQUEST, 9, [(DATA, b"fail")], correlation=CORRELATION + 1))
    failure = receive(dealer, "the failure of request 9")
    expect(failure.kind == KIND_FAILURE, f"the failure: kind {failure.kind}, not {KIND_FAILURE}")
    expect(failure.correlation == CORRELATION + 1, f"the failure: correlation id {failure.correlation:#x}")
    expect(failure.msgid == 9, f"the failure: message id {failure.msgid}, not the request's (9)")
    expect(failure.components == [(DATA, EXPECTED_FAILURE)],
           f"the failure: components {failure.components!r}, not [data {EXPECTED_FAILURE!r}]")

    # 5. Done.
    dealer.send_multipart(encode(KIND_MESSAGE, 3, [(DATA, b"done")]))
    dealer.linger = 5_000  # ending the context now waits, at most 5 s, until "done" is out
    dealer.close()
    port.close()
    return (f"pyzmq peer ok: checked in as {own_address.decode()}; job {job_data!r} -> "
            f"{job_data.upper()!r}; request 7 (correlation {CORRELATION:#x}) from a DEALER and from a REQ -> "
            f"{EXPECTED_REPLY!r}; request 9 -> failure {EXPECTED_FAILURE!r}; pyzmq {zmq.pyzmq_version()}, libzmq {zmq.zmq_version()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-dir", required=True, help="RunLoopKit's runtime directory")
    parser.add_argument("--main-name", required=True, help="the name of the RunLoopKit port")
    parser.add_argument("--worker-name", required=True, help="the name of this peer's own port")
    args = parser.parse_args()

    own_path = os.path.join(args.runtime_dir, f"{args.worker_name}.sock")
    main_path = os.path.join(args.runtime_dir, f"{args.main_name}.sock")
    ctx = zmq.Context()
    try:
        summary = run(own_path, main_path, ctx)
    except ProtocolError as error:
        problem = f"protocol violation: {error}"
    except zmq.Again:
        problem = f"send timed out after {TIMEOUT_MS} ms"
    except zmq.SystemCallError as error:
        problem = f"ZeroMQ error: {error}"
    else:
        problem = None
    if problem is None:
        ctx.term()
    else:
        ctx.destroy(linger=0)
    try:
        os.unlink(own_path)  # libzmq leaves a bound ipc socket's file behind
    except FileNotFoundError:
        pass
    if problem is not None:
        print(f"pyzmq peer: {problem}", file=sys.stderr)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
