// What the primitives a message's delivery is made of cost on this machine, one thread,
// no contention: a locked increment (what every Swift retain and release does), a
// malloc/free pair of a libzmq data frame's size, and a clock read (what a batch's time
// bound reads after each message). Quoted in docs/benchmarks.md and
// docs/experiments/2026-11-24-throughput-on-two-cpus.md.
//
//   cc -O2 docs/experiments/primitive-costs.c -o /tmp/primitive-costs && /tmp/primitive-costs
//
// Each figure is the median of nine runs of 20 million operations, in nanoseconds per
// operation (a dependent chain: the latency of one after another, not a throughput).
#include "experiment.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { COUNT = 20000000, RUNS = 9 };
static void *volatile sink;
static long counter;

static double locked_increment(void) {
    double start = now_ns();
    for (int i = 0; i < COUNT; i++) __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    return (now_ns() - start) / COUNT;
}

static double malloc_free(void) {
    double start = now_ns();
    for (int i = 0; i < COUNT; i++) {
        void *chunk = malloc(104); // libzmq's content for a 64-byte frame: 40 + 64 bytes
        sink = chunk;
        free(chunk);
    }
    return (now_ns() - start) / COUNT;
}

static double clock_read(void) {
    struct timespec t;
    long sum = 0;
    double start = now_ns();
    for (int i = 0; i < COUNT; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        sum += t.tv_nsec;
    }
    sink = (void *)sum;
    return (now_ns() - start) / COUNT;
}

static double median(double (*measure)(void)) {
    double samples[RUNS];
    for (int run = 0; run < RUNS; run++) samples[run] = measure();
    qsort(samples, RUNS, sizeof samples[0], by_value);
    return samples[RUNS / 2];
}

int main(void) {
    pin(0);
    printf("locked increment   %5.2f ns\n", median(locked_increment));
    printf("malloc+free (104)  %5.2f ns\n", median(malloc_free));
    printf("clock_gettime      %5.2f ns\n", median(clock_read));
    return 0;
}
