// Does the number of frames per message matter to libzmq's own speed? Raw libzmq, no
// RunLoopKit code: the same 64-byte payload sent as RunLoopKit's three frames (a 21-byte
// header, an empty reply address, the data) or as one 93-byte frame.
//
//   cc -O2 -o /tmp/zmq-frames docs/experiments/zmq-frames.c -lzmq -lpthread
//   /tmp/zmq-frames pingpong 3; /tmp/zmq-frames pingpong 1    # p50 round trip, PAIR
//   /tmp/zmq-frames stream 3;   /tmp/zmq-frames stream 1      # messages/s, PUSH to PULL
//
// Both threads of the ping-pong run on CPU 0; the stream's receiver on CPU 0 and its
// sender on CPU 1, as in runloopkit-bench's default placement.
#include "experiment.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

enum { COUNT = 200000 };
static int frames;
static void *context;

static void send_message(void *socket) {
    static char header[21], data[64], whole[21 + 64 + 8];
    if (frames == 1) { zmq_send(socket, whole, sizeof whole, 0); return; }
    zmq_send(socket, header, sizeof header, ZMQ_SNDMORE);
    zmq_send(socket, header, 0, ZMQ_SNDMORE);
    zmq_send(socket, data, sizeof data, 0);
}

static void receive_message(void *socket) {
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    do { zmq_msg_recv(&frame, socket, 0); } while (zmq_msg_more(&frame));
    zmq_msg_close(&frame);
}

static void *echo(void *unused) {
    pin(0);
    void *socket = zmq_socket(context, ZMQ_PAIR);
    zmq_connect(socket, "inproc://pingpong");
    for (int i = 0; i < COUNT; i++) { receive_message(socket); send_message(socket); }
    zmq_close(socket);
    return unused;
}

static void *stream_sender(void *unused) {
    pin(1);
    void *socket = zmq_socket(context, ZMQ_PUSH);
    zmq_connect(socket, "inproc://stream");
    for (int i = 0; i < COUNT * 5; i++) send_message(socket);
    zmq_close(socket);
    return unused;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s pingpong|stream 1|3\n", argv[0]); return 2; }
    frames = atoi(argv[2]);
    context = zmq_ctx_new();
    pin(0);
    pthread_t thread;
    if (strcmp(argv[1], "pingpong") == 0) {
        void *socket = zmq_socket(context, ZMQ_PAIR);
        zmq_bind(socket, "inproc://pingpong");
        pthread_create(&thread, NULL, echo, NULL);
        static double round_trips[COUNT];
        for (int i = 0; i < COUNT; i++) {
            double start = now_ns();
            send_message(socket);
            receive_message(socket);
            round_trips[i] = now_ns() - start;
        }
        qsort(round_trips, COUNT, sizeof(double), by_value);
        printf("pingpong, %d frame(s): p50 %.2f us\n", frames, round_trips[COUNT / 2] / 1000);
    } else {
        void *socket = zmq_socket(context, ZMQ_PULL);
        zmq_bind(socket, "inproc://stream");
        double start = now_ns();
        pthread_create(&thread, NULL, stream_sender, NULL);
        for (int i = 0; i < COUNT * 5; i++) receive_message(socket);
        printf("stream, %d frame(s): %.2f M messages/s\n", frames, COUNT * 5 / (now_ns() - start) * 1000);
    }
    pthread_join(thread, NULL);
    return 0;
}
