// What the experiments here share: a monotonic clock in nanoseconds, pinning the calling
// thread to one CPU, and an order for qsort of samples. Included by zmq-frames.c,
// code-footprint.c and primitive-costs.c (a quoted include finds it beside them; no -I
// needed).
#ifndef RUNLOOPKIT_EXPERIMENT_H
#define RUNLOOPKIT_EXPERIMENT_H
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <time.h>

static inline double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static inline int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
