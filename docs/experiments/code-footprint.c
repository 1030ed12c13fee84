// What does code footprint cost a ping-pong whose threads share one CPU? The driver of
// code-footprint.py, which generates the functions it calls and builds and runs it:
//
//   python3 docs/experiments/code-footprint.py
//
// Raw libzmq, no RunLoopKit code: two threads on CPU 0 bounce a 93-byte message over an
// inproc PAIR pair (blocking receive), and after each receive both run the work named on
// the command line (see code-footprint.py). Prints the round trip's p50.
#include "experiment.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

typedef uint64_t (*work_fn)(uint64_t);
work_fn find_work(const char *name); // in the generated functions
enum { COUNT = 200000 };
static void *context;
static work_fn work;
static volatile uint64_t sink;

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
