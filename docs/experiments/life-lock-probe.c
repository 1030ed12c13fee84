// How soon a watcher can learn that a SIGKILLed process died: a robust, process-shared
// mutex that a thread of the victim holds (the kernel releases it, FUTEX_OWNER_DIED, at the
// start of that thread's exit) against a pidfd (readable once the whole process is gone).
// No library. The victim: THREADS threads, MIB MiB of anonymous memory written, the lock
// taken by its main thread (see HOLDER).
//   life-lock-probe N THREADS MIB
// Environment: KILLER=1 kills from a thread of its own (else the watcher kills, then
// waits); PIN=1 puts the victim on CPU 1 and the watcher on CPU 0; SLICE=1 asks a 0.1 ms
// EEVDF slice for the watcher (sched_setattr, Linux 6.12); HOLDER=thread has a thread of
// the victim made for it take the lock, HOLDER=idle the same at SCHED_IDLE.
// gcc -O2 -pthread -o life-lock-probe life-lock-probe.c
#define _GNU_SOURCE
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static void *idle(void *unused) { (void)unused; for (;;) pause(); return 0; }
static void pin(int cpu) { cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set); sched_setaffinity(0, sizeof set, &set); }

static pthread_mutex_t *held;
static int holder_ready[2];
static void *holder(void *policy) {
    if (policy) { struct sched_param none = {0}; if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &none)) perror("SCHED_IDLE"); }
    pthread_mutex_lock(held);
    write(holder_ready[1], "h", 1);
    for (;;) pause();
    return 0;
}
static pid_t victim;
static _Atomic double killed_at;
static int killer_pipe[2];
static void *killer(void *unused) {
    (void)unused;
    char c;
    while (read(killer_pipe[0], &c, 1) == 1) { killed_at = now(); kill(victim, SIGKILL); }
    return 0;
}

struct sched_attr_ { uint32_t size, policy; uint64_t flags; int32_t nice; uint32_t priority; uint64_t runtime, deadline, period; uint32_t util_min, util_max; };

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: see the comment at the top\n"); return 2; }
    int n = atoi(argv[1]), threads = atoi(argv[2]), mib = atoi(argv[3]);
    int separate = getenv("KILLER") != 0, pinned = getenv("PIN") != 0;
    if (pinned) pin(0);
    if (getenv("SLICE")) {
        struct sched_attr_ a; memset(&a, 0, sizeof a); a.size = sizeof a; a.runtime = 100000;
        if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) perror("sched_setattr");
    }
    if (separate) { pipe(killer_pipe); pthread_t k; pthread_create(&k, 0, killer, 0); }
    double *lock_us = calloc(n, sizeof(double)), *pidfd_us = calloc(n, sizeof(double));
    for (int i = 0; i < n; i++) {
        pthread_mutex_t *lock = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        pthread_mutexattr_t attributes;
        pthread_mutexattr_init(&attributes);
        pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(lock, &attributes);
        int ready[2];
        pipe(ready);
        pid_t pid = fork();
        if (pid == 0) {
            if (pinned) pin(1);
            const char *h = getenv("HOLDER");
            if (h) {
                held = lock; pipe(holder_ready); pthread_t t;
                pthread_create(&t, 0, holder, strcmp(h, "idle") == 0 ? (void *)1 : 0);
                char x; read(holder_ready[0], &x, 1);
            } else pthread_mutex_lock(lock);
            size_t bytes = (size_t)mib << 20;
            if (bytes) memset(mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), 1, bytes);
            for (int t = 1; t < threads; t++) { pthread_t thread; pthread_create(&thread, 0, idle, 0); }
            write(ready[1], "r", 1);
            for (;;) pause();
        }
        char c;
        read(ready[0], &c, 1);
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        usleep(5000); // every thread of it asleep
        _Atomic uint32_t *word = (_Atomic uint32_t *)lock; // glibc's __data.__lock: the robust futex word
        atomic_fetch_or(word, FUTEX_WAITERS);
        double start = now();
        if (separate) { victim = pid; write(killer_pipe[1], "k", 1); } else kill(pid, SIGKILL);
        for (;;) {
            uint32_t seen = atomic_load(word);
            if (seen & FUTEX_OWNER_DIED) break;
            syscall(SYS_futex, word, FUTEX_WAIT, seen, 0, 0, 0);
        }
        double released = now();
        struct pollfd entry = { pidfd, POLLIN, 0 };
        poll(&entry, 1, -1);
        double gone = now();
        if (separate) start = killed_at;
        lock_us[i] = released - start;
        pidfd_us[i] = gone - start;
        close(pidfd); close(ready[0]); close(ready[1]);
        waitpid(pid, 0, 0);
        munmap(lock, 4096);
    }
    qsort(lock_us, n, sizeof(double), cmp);
    qsort(pidfd_us, n, sizeof(double), cmp);
    printf("%d threads, %d MiB%s%s: robust lock released p50 %.0f p90 %.0f p99 %.0f us | pidfd readable p50 %.0f p99 %.0f us (%d kills)\n",
           threads, mib, separate ? ", killer thread" : "", pinned ? ", pinned apart" : "",
           lock_us[n / 2], lock_us[n * 9 / 10], lock_us[n * 99 / 100], pidfd_us[n / 2], pidfd_us[n * 99 / 100], n);
    return 0;
}
