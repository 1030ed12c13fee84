#include "signal_relay.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

// Each slot holds a descriptor plus one, so that zero (the initial state) means empty.
static _Atomic int relay_slots[NSIG][RLK_SIGNAL_RELAY_SLOTS];
// Handlers running now, in any thread; `remove` waits for it to reach zero.
static _Atomic int relay_active;

static void relay_handler(int signo) {
    int saved_errno = errno;
    atomic_fetch_add(&relay_active, 1);
    if (signo > 0 && signo < NSIG) {
        for (int slot = 0; slot < RLK_SIGNAL_RELAY_SLOTS; slot++) {
            int fd = atomic_load(&relay_slots[signo][slot]) - 1;
            if (fd >= 0) {
                uint64_t one = 1;
                ssize_t written = write(fd, &one, sizeof one); // async-signal-safe
                (void)written; // EAGAIN only when the counter is near 2^64: nothing to do
            }
        }
    }
    atomic_fetch_sub(&relay_active, 1);
    errno = saved_errno;
}

int rlk_signal_relay_add(int signo, int eventfd) {
    if (signo <= 0 || signo >= NSIG) return -1;
    for (int slot = 0; slot < RLK_SIGNAL_RELAY_SLOTS; slot++) {
        int empty = 0;
        if (atomic_compare_exchange_strong(&relay_slots[signo][slot], &empty, eventfd + 1)) return slot;
    }
    return -1;
}

void rlk_signal_relay_remove(int signo, int slot) {
    if (signo <= 0 || signo >= NSIG || slot < 0 || slot >= RLK_SIGNAL_RELAY_SLOTS) return;
    atomic_store(&relay_slots[signo][slot], 0);
    // A handler that loaded the descriptor before the store may still write to it: wait
    // for handlers in flight (they run a few writes, never block) before it may be closed.
    while (atomic_load(&relay_active) != 0) {
        sched_yield();
    }
}

int rlk_signal_relay_install(int signo, struct sigaction *previous) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = relay_handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    return sigaction(signo, &action, previous);
}

int rlk_signal_relay_restore(int signo, const struct sigaction *previous) {
    return sigaction(signo, previous, NULL);
}

int rlk_signal_relay_is_installed(int signo) {
    struct sigaction current;
    if (sigaction(signo, NULL, &current) != 0) return 0;
    return current.sa_handler == relay_handler;
}

unsigned long rlk_sigaction_size(void) { return sizeof(struct sigaction); }
