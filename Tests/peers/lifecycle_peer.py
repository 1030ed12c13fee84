#!/usr/bin/env python3
"""A RunLoopKit peer for the request lifecycle (cancel, no reply), written from
docs/wire-format.md ("Requests and replies", steps 1-8) with pyzmq alone.

server    A port: a ROUTER socket bound to --endpoint, or, with --name, a named port in
          --runtime-dir (binds ipc://DIR/NAME.sock and holds NAME.lock's lock as a
          RunLoopKit owner does, so that RunLoopKit sees a live owner until this process
          dies). It answers each request (kind 1):
            - of a message id in --no-reply: with a no reply (kind 5) at once;
            - any other: after --defer seconds, with a reply (kind 2) of one data
              component, "reply:" and the request's first data component;
          and answers even a request cancelled meanwhile (unless --honor-cancel), as a
          server that ignores cancels does: the requester must drop that reply as late.
          It prints, one line each, flushed:
            ready <endpoint>                 once bound (and the name's lock held)
            request <correlation id> <message id>
            cancel <correlation id> <message id>   a kind-4 cancel received
            replied <correlation id>
            noreply <correlation id>
          and runs until it is killed, or its parent process ends.

client    A requester: a DEALER connected to --endpoint sends one request (kind 1, message
          id --message-id, correlation id --correlation-id, one data component "ping"),
          then after --cancel-after seconds a cancel (kind 4) of --cancel-correlation-id
          (the request's own by default: another's, to play a peer that cancels what it
          did not send), then prints what comes back within --wait seconds, one line each:
            sent <correlation id>
            cancelled <correlation id>
            received <kind> <correlation id> <message id>
          and "done" when --wait is over. Exit status 0.

Ids are decimal. Usage:
  lifecycle_peer.py server (--endpoint EP | --name NAME --runtime-dir DIR)
                           [--defer SECONDS] [--no-reply ID[,ID...]] [--honor-cancel]
  lifecycle_peer.py client --endpoint EP [--message-id N] [--correlation-id C]
                           [--cancel-after SECONDS] [--cancel-correlation-id C] [--wait SECONDS]
"""

import argparse
import fcntl
import heapq
import os
import struct
import sys
import time

import zmq

HEADER = struct.Struct("<3sBBBHiQH")  # magic, version, kind, flags, N, message id, correlation id, R
ENTRY = struct.Struct("<BI")          # a component table entry: kind, length
DATA, PORT, ALONE = 0, 1, 2           # component kinds
MESSAGE, REQUEST, REPLY, FAILURE, CANCEL, NO_REPLY = 0, 1, 2, 3, 4, 5
F_OFD_SETLK = 37                      # Linux, docs/wire-format.md "Where named ports live"


def say(line):
    print(line, flush=True)


def header_only(kind, message_id, correlation_id):
    """A message of no components and no reply port: its 22-byte header (a cancel, a no reply)."""
    return HEADER.pack(b"RLK", 3, kind, 0, 0, message_id, correlation_id, 0)


def with_data(kind, message_id, correlation_id, data):
    """A message of one small data component, inline."""
    return HEADER.pack(b"RLK", 3, kind, 0, 1, message_id, correlation_id, 0) + ENTRY.pack(DATA, len(data)) + data


def first_data(frames):
    """The first data component of a received message, or b"" (walks the component table)."""
    frame = frames[0]
    _, _, _, _, n, _, _, r = HEADER.unpack_from(frame)
    inline = HEADER.size + ENTRY.size * n + r
    alone = 1
    for i in range(n):
        kind, length = ENTRY.unpack_from(frame, HEADER.size + ENTRY.size * i)
        if kind == ALONE:
            return frames[alone]
        if kind == DATA:
            return frame[inline:inline + length]
        inline += length
    return b""


def hold_name(directory, name):
    """Takes NAME.lock's exclusive OFD lock and writes our pid, as a RunLoopKit owner does."""
    fd = os.open(os.path.join(directory, name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    # struct flock: l_type, l_whence (short each), l_start, l_len (off_t), l_pid (int), padding.
    lock = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    fcntl.fcntl(fd, F_OFD_SETLK, lock)
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d\n" % os.getpid(), 0)
    return fd


def serve(args):
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    if args.name:
        hold_name(args.runtime_dir, args.name)
        path = os.path.join(args.runtime_dir, args.name + ".sock")
        if os.path.exists(path):
            os.unlink(path)  # a dead owner's
        router.bind("ipc://" + path)
    else:
        router.bind(args.endpoint)
    say("ready " + router.getsockopt_string(zmq.LAST_ENDPOINT))
    no_reply = {int(i) for i in args.no_reply.split(",") if i}
    due = []  # (when, sequence, routing id, correlation id, message id, data)
    cancelled = set()
    sequence = 0
    poller = zmq.Poller()
    poller.register(router, zmq.POLLIN)
    parent = os.getppid()
    while True:
        timeout = 1000 if not due else min(1000, max(0, (due[0][0] - time.monotonic()) * 1000))
        events = dict(poller.poll(timeout))
        if os.getppid() != parent:
            return 0  # the test that started us is gone
        if router in events:
            while True:
                try:
                    routing_id, *frames = router.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if frames and frames[0] == b"":
                    frames = frames[1:]  # a REQ requester's delimiter
                magic, version, kind, flags, n, message_id, correlation, r = HEADER.unpack_from(frames[0])
                assert (magic, version, flags) == (b"RLK", 3, 0), frames[0][:6]
                if kind == REQUEST:
                    say("request %d %d" % (correlation, message_id))
                    if message_id in no_reply:
                        router.send_multipart([routing_id, header_only(NO_REPLY, message_id, correlation)])
                        say("noreply %d" % correlation)
                    else:
                        sequence += 1
                        heapq.heappush(due, (time.monotonic() + args.defer, sequence, routing_id, correlation,
                                             message_id, first_data(frames)))
                elif kind == CANCEL:
                    assert n == 0 and r == 0 and len(frames) == 1 and len(frames[0]) == HEADER.size
                    cancelled.add((routing_id, correlation))
                    say("cancel %d %d" % (correlation, message_id))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, routing_id, correlation, message_id, data = heapq.heappop(due)
            if args.honor_cancel and (routing_id, correlation) in cancelled:
                continue
            try:
                router.send_multipart([routing_id, with_data(REPLY, message_id, correlation, b"reply:" + data)])
                say("replied %d" % correlation)
            except zmq.ZMQError as error:
                say("reply-failed %d %s" % (correlation, error))


def request(args):
    ctx = zmq.Context.instance()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 1000)
    dealer.connect(args.endpoint)
    dealer.send(with_data(REQUEST, args.message_id, args.correlation_id, b"ping"))
    say("sent %d" % args.correlation_id)
    if args.cancel_after is not None:
        time.sleep(args.cancel_after)
        victim = args.cancel_correlation_id if args.cancel_correlation_id is not None else args.correlation_id
        dealer.send(header_only(CANCEL, args.message_id, victim))
        say("cancelled %d" % victim)
    deadline = time.monotonic() + args.wait
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not dealer.poll(left * 1000):
            break
        frames = dealer.recv_multipart()
        _, _, kind, _, _, message_id, correlation, _ = HEADER.unpack_from(frames[0])
        say("received %d %d %d" % (kind, correlation, message_id))
    say("done")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    server = roles.add_parser("server")
    server.add_argument("--endpoint")
    server.add_argument("--name")
    server.add_argument("--runtime-dir")
    server.add_argument("--defer", type=float, default=0.0)
    server.add_argument("--no-reply", default="")
    server.add_argument("--honor-cancel", action="store_true")
    client = roles.add_parser("client")
    client.add_argument("--endpoint", required=True)
    client.add_argument("--message-id", type=int, default=1)
    client.add_argument("--correlation-id", type=int, default=1)
    client.add_argument("--cancel-after", type=float)
    client.add_argument("--cancel-correlation-id", type=int)
    client.add_argument("--wait", type=float, default=1.0)
    args = parser.parse_args()
    if args.role == "server":
        if bool(args.endpoint) == bool(args.name) or (args.name and not args.runtime_dir):
            parser.error("server: --endpoint, or --name with --runtime-dir")
        return serve(args)
    return request(args)


if __name__ == "__main__":
    sys.exit(main())
