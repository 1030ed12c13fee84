#!/usr/bin/env python3
"""What does code footprint cost a ping-pong whose threads share one CPU?

Raw libzmq, no RunLoopKit code: two threads on CPU 0 bounce a 93-byte message over an
inproc PAIR pair (blocking receive), and after each receive both run the same chain of
N small functions (`x = f(x)`, each alone in its 64-byte cache line). "same" calls one
function N times (the instructions, in one line); "scattered" calls N different ones in a
shuffled order (the same instructions, spread over N lines: N × 64 bytes of code).
Scattered minus same is what the footprint costs beyond the instructions.

    python3 docs/experiments/code-footprint.py      # writes, builds and runs in /tmp
"""
import os
import random
import subprocess

SIZES = (150, 300, 600, 1200)
WORK = "/tmp/code-footprint"

DRIVER = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

typedef uint64_t (*work_fn)(uint64_t);
work_fn find_work(const char *name);
enum { COUNT = 200000 };
static void *context;
static work_fn work;
static volatile uint64_t sink;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void bounce(void *socket, int i) {
    static char message[93];
    zmq_recv(socket, message, sizeof message, 0);
    sink = work(sink + i);
}

static void *echo(void *unused) {
    pin(0);
    static char message[93];
    void *socket = zmq_socket(context, ZMQ_PAIR);
    zmq_connect(socket, "inproc://footprint");
    for (int i = 0; i < COUNT; i++) { bounce(socket, i); zmq_send(socket, message, sizeof message, 0); }
    zmq_close(socket);
    return unused;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 2 || !(work = find_work(argv[1]))) { fprintf(stderr, "usage: %s none|sameN|scatteredN\n", argv[0]); return 2; }
    context = zmq_ctx_new();
    pin(0);
    void *socket = zmq_socket(context, ZMQ_PAIR);
    zmq_bind(socket, "inproc://footprint");
    pthread_t thread;
    pthread_create(&thread, NULL, echo, NULL);
    static double round_trips[COUNT];
    static char message[93];
    for (int i = 0; i < COUNT; i++) {
        double start = now_ns();
        zmq_send(socket, message, sizeof message, 0);
        bounce(socket, i);
        round_trips[i] = now_ns() - start;
    }
    qsort(round_trips, COUNT, sizeof(double), by_value);
    printf("%-14s p50 %.2f us\n", argv[1], round_trips[COUNT / 2] / 1000);
    pthread_join(thread, NULL);
    return 0;
}
"""


def functions():
    random.seed(7)
    lines = ["#include <stdint.h>", "#include <string.h>"]
    for k in range(max(SIZES)):
        lines.append(f"__attribute__((noinline, aligned(64))) uint64_t f{k}(uint64_t x) "
                     f"{{ return (x * {2 * k + 1}u) ^ (x >> {k % 13 + 1}); }}")
    lines.append("static uint64_t none(uint64_t x) { return x; }")
    table = ['{"none", none}']
    for n in SIZES:
        order = list(range(n))
        random.shuffle(order)
        lines.append(f"static uint64_t scattered{n}(uint64_t x) {{")
        lines += [f"  x = f{k}(x);" for k in order]
        lines.append("  return x; }")
        lines.append(f"static uint64_t same{n}(uint64_t x) {{")
        lines += ["  x = f0(x);"] * n
        lines.append("  return x; }")
        table += [f'{{"same{n}", same{n}}}', f'{{"scattered{n}", scattered{n}}}']
    lines.append("typedef uint64_t (*work_fn)(uint64_t);")
    lines.append("static const struct { const char *name; work_fn fn; } works[] = { " + ", ".join(table) + " };")
    lines.append("work_fn find_work(const char *name) {")
    lines.append("  for (unsigned i = 0; i < sizeof works / sizeof works[0]; i++)")
    lines.append("    if (!strcmp(works[i].name, name)) return works[i].fn;")
    lines.append("  return 0; }")
    return "\n".join(lines) + "\n"


def main():
    os.makedirs(WORK, exist_ok=True)
    with open(f"{WORK}/driver.c", "w") as f:
        f.write(DRIVER)
    with open(f"{WORK}/functions.c", "w") as f:
        f.write(functions())
    binary = f"{WORK}/code-footprint"
    subprocess.run(["cc", "-O2", "-o", binary, f"{WORK}/driver.c", f"{WORK}/functions.c", "-lzmq", "-lpthread"],
                   check=True)
    names = ["none"] + [f"{kind}{n}" for n in SIZES for kind in ("same", "scattered")]
    for _ in range(3):  # interleaved, so that drift falls on all alike
        for name in names:
            subprocess.run([binary, name], check=True)


if __name__ == "__main__":
    main()
