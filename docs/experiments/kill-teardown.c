// How long the kernel takes to end a process after SIGKILL, measured as a peer-death
// watcher sees it: kill(2), then poll(2) on a pidfd until it is readable. No library.
//   kill-teardown N shape THREADS MIB        a forked process: THREADS threads, MIB MiB
//                                            of anonymous memory written
//   kill-teardown N exec COMMAND [ARGS...]   a command that prints a line once ready
// gcc -O2 -pthread -o kill-teardown kill-teardown.c
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *unused) { (void)unused; for (;;) pause(); return 0; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

static void shape(int threads, int mib, int ready) {
    size_t bytes = (size_t)mib << 20;
    if (bytes) memset(mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), 1, bytes);
    for (int t = 1; t < threads; t++) { pthread_t thread; pthread_create(&thread, 0, idle, 0); }
    write(ready, "ready\n", 6);
    for (;;) pause();
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: see the comment at the top\n"); return 2; }
    int n = atoi(argv[1]), exec = strcmp(argv[2], "exec") == 0;
    double *latency = calloc(n, sizeof *latency);
    for (int i = 0; i < n; i++) {
        int out[2], in[2];
        pipe(out); pipe(in);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(out[1], 1); dup2(in[0], 0); close(out[0]); close(in[1]);
            if (exec) { execvp(argv[3], argv + 3); _exit(127); }
            shape(atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0, 1);
        }
        close(out[1]); close(in[0]);
        char c;
        while (read(out[0], &c, 1) == 1 && c != '\n') {}
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        usleep(5000); // every thread of it asleep
        struct pollfd entry = { pidfd, POLLIN, 0 };
        double start = now();
        kill(pid, SIGKILL);
        poll(&entry, 1, -1);
        latency[i] = now() - start;
        close(pidfd); close(out[0]); close(in[1]);
        waitpid(pid, 0, 0);
    }
    qsort(latency, n, sizeof *latency, cmp);
    printf("%s %s: SIGKILL -> pidfd readable, p50 %.0f us, p99 %.0f us, max %.0f us (%d kills)\n",
           argv[2], argv[3], latency[n / 2], latency[n * 99 / 100], latency[n - 1], n);
    return 0;
}
