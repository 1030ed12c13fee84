// Wake-up latency of a thread asleep in poll(2), after its waker wrote N bytes (the
// "fill"), on two pinned CPUs: what issue 42's filled->handler probe pays outside any library.
#define _GNU_SOURCE
#include <pthread.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int pair[2], back[2];
static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
static int cmp(const void *a, const void *b) { uint64_t x = *(uint64_t *)a, y = *(uint64_t *)b; return x < y ? -1 : x > y; }

static void *receiver(void *unused) {
    pin(1);
    for (;;) {
        struct pollfd p = { pair[1], POLLIN, 0 };
        poll(&p, 1, -1);
        uint64_t stamp; if (read(pair[1], &stamp, 8) != 8) return NULL;
        uint64_t late = now() - stamp;
        if (write(back[0], &late, 8) != 8) return NULL;
    }
}

int main(void) {
    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair);
    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, back);
    pthread_t thread; pthread_create(&thread, NULL, receiver, NULL);
    pin(0);
    size_t sizes[] = { 64 << 10, 4 << 20 };
    size_t window = 32 << 20;
    char *ring = malloc(64 << 20); memset(ring, 1, 64 << 20);
    for (int round = 0; round < 2; round++) {
        for (int idle = 0; idle < 3; idle++) { // no fill: the waker only waits, 10, 60 or 250 us
            uint64_t waits[] = { 10000, 60000, 250000 };
            enum { N = 300 };
            uint64_t lates[N];
            for (int i = 0; i < N + 20; i++) {
                uint64_t until = now() + waits[idle];
                while (now() < until) {}
                uint64_t stamp = now();
                if (write(pair[0], &stamp, 8) != 8) return 1;
                uint64_t late; if (read(back[1], &late, 8) != 8) return 1;
                if (i >= 20) lates[i - 20] = late;
            }
            qsort(lates, N, 8, cmp);
            printf("      idle %4llu us: wake p50 %6.1f us p90 %6.1f\n", (unsigned long long)waits[idle] / 1000, lates[N / 2] / 1e3, lates[N * 9 / 10] / 1e3);
        }
        for (int s = 0; s < 2; s++) {
            enum { N = 300 };
            uint64_t lates[N]; size_t at = 0;
            for (int i = 0; i < N + 20; i++) {
                if (at + sizes[s] > window) at = 0;
                memset(ring + at, i, sizes[s]); at += sizes[s];
                uint64_t stamp = now();
                if (write(pair[0], &stamp, 8) != 8) return 1;
                uint64_t late; if (read(back[1], &late, 8) != 8) return 1;
                if (i >= 20) lates[i - 20] = late;
            }
            qsort(lates, N, 8, cmp);
            printf("%s fill %7zu B: wake p50 %6.1f us p90 %6.1f\n", s ? "   " : "", sizes[s], lates[N / 2] / 1e3, lates[N * 9 / 10] / 1e3);
        }
    }
    return 0;
}
