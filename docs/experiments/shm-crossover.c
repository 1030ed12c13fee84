// Where does shared memory beat a plain libzmq ipc message, and what does a sealed segment
// per message cost? Two processes (fork), a sender pinned to CPU 0 and a receiver pinned to
// CPU 1, as runloopkit-bench's port-throughput-processes places them; the sender writes
// every 64-bit word of each payload and the receiver reads (sums and checks) every word.
// Three ways to move a payload, all carried by a PUSH→PULL message over ipc (which keeps
// ordering and the high-water mark, as RunLoopKit's ports would):
//
//   plain   the payload is the ZeroMQ message (zmq_msg_init_size, filled in place; read in
//           place after zmq_msg_recv): today's path without RunLoopKit's code.
//   ring    the ZeroMQ message is 16 bytes {sequence, slot, length}; the payload is written in
//           place into a slot of a memfd ring both processes map once (sealed against shrink
//           and grow, so a sender cannot make the reader fault), read where it lies, and the
//           slot given back through a shared counter; a side that must wait sleeps on an
//           eventfd, woken only when it said it sleeps (no spin, no system call otherwise).
//   sealed  a fresh memfd per message, filled, unmapped and sealed (F_SEAL_WRITE, SHRINK,
//           GROW, SEAL), its descriptor sent over a Unix socket (SCM_RIGHTS) before the
//           ZeroMQ message; the receiver checks the seals and size, maps it read-only, reads,
//           unmaps and closes. A sealed memfd can never be written again, so none is reused.
//
//   cc -O2 -o /tmp/shm-crossover docs/experiments/shm-crossover.c -lzmq
//   /tmp/shm-crossover [ROUNDS]      (default 5; prints the median rate per mode and size)
#define _GNU_SOURCE
#include "experiment.h"
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define SIZES 12
static const size_t sizes[SIZES] = {64, 256, 1 << 10, 4 << 10, 16 << 10, 32 << 10, 64 << 10, 256 << 10,
                                    1 << 20, 4 << 20, 16 << 20, 64 << 20};
enum { PLAIN, RING, SEALED, MODES };
static const char *mode_names[MODES] = {"plain", "ring", "sealed"};

struct header { // the ring's first page: a cache line per counter
    _Atomic uint64_t head; char p0[56];
    _Atomic uint64_t tail; char p1[56];
    _Atomic uint64_t receiver_asleep; char p2[56];
    _Atomic uint64_t sender_wake_at; char p3[56]; // the tail at which to wake it; 0: awake
};
struct note { uint64_t sequence; uint32_t slot; uint32_t length; };

static void die(const char *what) { perror(what); exit(1); }

static void fill(void *p, size_t n, uint64_t seed) {
    uint64_t *w = p;
    for (size_t i = 0; i < n / 8; i++) w[i] = seed + i;
}
static void check(const void *p, size_t n) {
    const uint64_t *w = p;
    uint64_t sum = 0, k = n / 8;
    for (size_t i = 0; i < k; i++) sum += w[i];
    if (sum != k * w[0] + k * (k - 1) / 2) { fprintf(stderr, "torn payload\n"); exit(1); }
}

static void sleep_on(_Atomic uint64_t *flag, uint64_t value, int fd, int (*ready)(void *), void *arg) {
    atomic_store(flag, value);
    if (!ready(arg)) { uint64_t v; while (read(fd, &v, 8) < 0 && errno == EINTR) {} }
    atomic_store_explicit(flag, 0, memory_order_relaxed);
}
static void wake(_Atomic uint64_t *flag, int fd) {
    if (atomic_load(flag) && atomic_exchange(flag, 0)) { uint64_t one = 1; if (write(fd, &one, 8) < 0) die("write"); }
}

struct ring { struct header *h; char *slots; size_t stride, count; int ready, freed; uint64_t position, wake_at; };
// A sender that found the ring full sleeps until half of it is free.
static int ring_half_free(void *a) { struct ring *r = a; return atomic_load(&r->h->tail) >= r->wake_at; }

static int side[2];     // SOCK_SEQPACKET pair for the sealed mode's descriptors
static int ring_fd, ready_fd, freed_fd;
static size_t ring_bytes;

static void send_fd(int fd, size_t length) {
    char control[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec v = {&length, sizeof length};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_RIGHTS; c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(side[0], &m, 0) < 0) die("sendmsg");
}
static int receive_fd(size_t *length) {
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec v = {length, sizeof *length};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    if (recvmsg(side[1], &m, MSG_CMSG_CLOEXEC) < 0) die("recvmsg");
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS) { fprintf(stderr, "no descriptor\n"); exit(1); }
    int fd; memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

// The ring's layout for a payload size: as in runloopkit-bench's floor-shm (16 MiB of
// slots, 8 to 65,536).
static void layout(size_t size, size_t *stride, size_t *count) {
    *stride = (size + 63) / 64 * 64;
    size_t c = (16 << 20) / *stride;
    *count = c < 8 ? 8 : c > 65536 ? 65536 : c;
}

static void receiver(void) {
    pin(1);
    void *ctx = zmq_ctx_new(), *pull = zmq_socket(ctx, ZMQ_PULL);
    if (zmq_bind(pull, "ipc:///tmp/shm-crossover.ipc")) die("bind");
    void *push = zmq_socket(ctx, ZMQ_PUSH); // acknowledgements
    if (zmq_connect(push, "ipc:///tmp/shm-crossover-ack.ipc")) die("connect");
    char *base = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
    if (base == MAP_FAILED) die("mmap");
    struct ring r = {(struct header *)base, base + 4096, 0, 0, ready_fd, freed_fd, 0, 0};
    zmq_msg_t msg; zmq_msg_init(&msg);
    for (;;) {
        uint64_t plan[3]; // mode, size, messages; mode 99 ends
        if (zmq_recv(pull, plan, sizeof plan, 0) != sizeof plan) die("plan");
        if (plan[0] == 99) break;
        size_t size = plan[1];
        for (uint64_t i = 0; i < plan[2]; i++) {
            if (zmq_msg_recv(&msg, pull, 0) < 0) die("zmq_msg_recv");
            if (plan[0] == PLAIN) { check(zmq_msg_data(&msg), zmq_msg_size(&msg)); continue; }
            struct note n; memcpy(&n, zmq_msg_data(&msg), sizeof n);
            if (plan[0] == RING) {
                layout(size, &r.stride, &r.count);
                if (n.slot >= r.count || n.length > r.stride) { fprintf(stderr, "bad note\n"); exit(1); }
                check(r.slots + n.slot * r.stride, n.length);
                r.position++;
                atomic_store(&r.h->tail, r.position);
                uint64_t at = atomic_load(&r.h->sender_wake_at);
                if (at && r.position >= at) wake(&r.h->sender_wake_at, freed_fd);
            } else {
                size_t length; int fd = receive_fd(&length);
                int seals = fcntl(fd, F_GET_SEALS);
                struct stat st;
                int need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
                if ((seals & need) != need || fstat(fd, &st) || (size_t)st.st_size < n.length) { fprintf(stderr, "unsealed\n"); exit(1); }
                void *p = mmap(NULL, n.length, PROT_READ, MAP_SHARED, fd, 0);
                if (p == MAP_FAILED) die("mmap sealed");
                check(p, n.length);
                munmap(p, n.length);
                close(fd);
            }
        }
        uint64_t done = 1;
        zmq_send(push, &done, sizeof done, 0);
    }
    zmq_close(pull); zmq_close(push); zmq_ctx_term(ctx);
}

static double round_rate(void *push, void *ack, struct ring *r, int mode, size_t size, uint64_t messages, uint64_t *seq) {
    uint64_t plan[3] = {mode, size, messages}, done;
    zmq_send(push, plan, sizeof plan, 0);
    double start = now_ns();
    zmq_msg_t msg;
    for (uint64_t i = 0; i < messages; i++, (*seq)++) {
        if (mode == PLAIN) {
            zmq_msg_init_size(&msg, size);
            fill(zmq_msg_data(&msg), size, *seq);
        } else if (mode == RING) {
            while (r->position - atomic_load(&r->h->tail) >= r->count) {
                r->wake_at = r->position - r->count + (r->count + 1) / 2;
                sleep_on(&r->h->sender_wake_at, r->wake_at, freed_fd, ring_half_free, r);
            }
            struct note n = {*seq, (uint32_t)(r->position % r->count), (uint32_t)size};
            fill(r->slots + n.slot * r->stride, size, *seq);
            r->position++;
            atomic_store(&r->h->head, r->position); // not read by the receiver: the note is the signal
            zmq_msg_init_size(&msg, sizeof n);
            memcpy(zmq_msg_data(&msg), &n, sizeof n);
        } else {
            int fd = memfd_create("shm-crossover", MFD_CLOEXEC | MFD_ALLOW_SEALING);
            if (fd < 0 || ftruncate(fd, size)) die("memfd");
            void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) die("mmap");
            fill(p, size, *seq);
            munmap(p, size);
            if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) die("seal");
            send_fd(fd, size);
            close(fd);
            struct note n = {*seq, 0, (uint32_t)size};
            zmq_msg_init_size(&msg, sizeof n);
            memcpy(zmq_msg_data(&msg), &n, sizeof n);
        }
        if (zmq_msg_send(&msg, push, 0) < 0) die("zmq_msg_send");
    }
    zmq_recv(ack, &done, sizeof done, 0);
    return messages * size / ((now_ns() - start) / 1e9);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    ring_bytes = 4096 + (size_t)(64 << 20) * 8; // the largest layout: 8 slots of 64 MiB
    ring_fd = memfd_create("shm-crossover-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (ring_fd < 0 || ftruncate(ring_fd, ring_bytes)) die("ring");
    if (fcntl(ring_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) die("seal ring");
    ready_fd = eventfd(0, EFD_CLOEXEC); freed_fd = eventfd(0, EFD_CLOEXEC);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, side)) die("socketpair");
    pid_t pid = fork();
    if (pid == 0) { receiver(); _exit(0); }
    pin(0);
    void *ctx = zmq_ctx_new(), *push = zmq_socket(ctx, ZMQ_PUSH), *ack = zmq_socket(ctx, ZMQ_PULL);
    if (zmq_bind(ack, "ipc:///tmp/shm-crossover-ack.ipc") || zmq_connect(push, "ipc:///tmp/shm-crossover.ipc")) die("zmq");
    char *base = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
    if (base == MAP_FAILED) die("mmap");
    struct ring r = {(struct header *)base, base + 4096, 0, 0, ready_fd, freed_fd, 0, 0};
    uint64_t seq = 0;
    printf("%-8s", "MB/s");
    for (int m = 0; m < MODES; m++) printf(" %10s", mode_names[m]);
    printf("   ring/plain sealed/plain\n");
    for (int s = 0; s < SIZES; s++) {
        size_t size = sizes[s];
        uint64_t messages = (256u << 20) / size;
        if (messages < 8) messages = 8;
        if (messages > 20000) messages = 20000;
        layout(size, &r.stride, &r.count);
        double rates[MODES][64];
        for (int m = 0; m < MODES; m++) round_rate(push, ack, &r, m, size, messages / 4 + 1, &seq); // warm-up
        for (int k = 0; k < rounds; k++)
            for (int j = 0; j < MODES; j++) { int m = (j + k) % MODES; rates[m][k] = round_rate(push, ack, &r, m, size, messages, &seq); }
        double median[MODES];
        for (int m = 0; m < MODES; m++) { qsort(rates[m], rounds, sizeof(double), by_value); median[m] = rates[m][rounds / 2]; }
        char label[16];
        if (size < 1024) snprintf(label, sizeof label, "%zu B", size);
        else snprintf(label, sizeof label, size >= (1 << 20) ? "%zu MiB" : "%zu KiB", size >= (1 << 20) ? size >> 20 : size >> 10);
        printf("%-8s", label);
        for (int m = 0; m < MODES; m++) printf(" %10.0f", median[m] / 1e6);
        printf("   %10.2f %12.2f\n", median[RING] / median[PLAIN], median[SEALED] / median[PLAIN]);
        fflush(stdout);
    }
    uint64_t end[3] = {99, 0, 0};
    zmq_send(push, end, sizeof end, 0);
    waitpid(pid, NULL, 0);
    zmq_close(push); zmq_close(ack); zmq_ctx_term(ctx);
    return 0;
}
