#include "signal_relay.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// Each slot holds a descriptor plus one, so that zero (the initial state) means empty.
static _Atomic int relay_slots[NSIG][RLK_SIGNAL_RELAY_SLOTS];
// Handlers running now, in any thread; `remove` waits (a futex) for it to reach zero.
static _Atomic int relay_active;
// Callers of `remove` waiting for `relay_active` to reach zero: a handler that brings it
// there wakes them.
static _Atomic int relay_waiters;
// The process that installed the relay for each signal, and the action it replaced. A
// child forked since inherits the handler and the watchers' eventfds, which it shares
// with its parent: it must not write to them (its parent would see a signal it never
// got), so it restores the action the relay replaced and hands it the signal.
static _Atomic pid_t relay_pid[NSIG];
static struct sigaction relay_previous[NSIG];

// In a forked child: restores the action the relay replaced, then runs it for this
// delivery — its handler called directly (as a chained handler is), or, for the default
// action, the signal raised again (blocked until the relay returns, then acted on).
static void relay_hand_back(int signo, siginfo_t *info, void *context) {
    const struct sigaction *previous = &relay_previous[signo];
    sigaction(signo, previous, NULL); // async-signal-safe, as is all below
    if (previous->sa_flags & SA_SIGINFO) {
        previous->sa_sigaction(signo, info, context);
    } else if (previous->sa_handler == SIG_DFL) {
        raise(signo);
    } else if (previous->sa_handler != SIG_IGN) {
        previous->sa_handler(signo);
    }
}

static void relay_handler(int signo, siginfo_t *info, void *context) {
    int saved_errno = errno;
    if (signo <= 0 || signo >= NSIG) return;
    if (atomic_load(&relay_pid[signo]) != getpid()) {
        relay_hand_back(signo, info, context);
        errno = saved_errno;
        return;
    }
    atomic_fetch_add(&relay_active, 1);
    for (int slot = 0; slot < RLK_SIGNAL_RELAY_SLOTS; slot++) {
        int fd = atomic_load(&relay_slots[signo][slot]) - 1;
        if (fd >= 0) {
            uint64_t one = 1;
            ssize_t written = write(fd, &one, sizeof one); // async-signal-safe
            (void)written; // EAGAIN only when the counter is near 2^64: nothing to do
        }
    }
    if (atomic_fetch_sub(&relay_active, 1) == 1 && atomic_load(&relay_waiters) != 0) {
        syscall(SYS_futex, &relay_active, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
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
    // FUTEX_WAIT sleeps only while the count is still `active`: a handler that ended
    // between the load and the wait makes it return at once, so no wake-up is lost.
    atomic_fetch_add(&relay_waiters, 1);
    int active;
    while ((active = atomic_load(&relay_active)) != 0) {
        syscall(SYS_futex, &relay_active, FUTEX_WAIT_PRIVATE, active, NULL, NULL, 0);
    }
    atomic_fetch_sub(&relay_waiters, 1);
}

int rlk_signal_relay_install(int signo, struct sigaction *previous) {
    if (signo <= 0 || signo >= NSIG) { errno = EINVAL; return -1; }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = relay_handler;
    action.sa_flags = SA_RESTART | SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    atomic_store(&relay_pid[signo], getpid()); // before the handler can run
    int result = sigaction(signo, &action, previous);
    if (result == 0) relay_previous[signo] = *previous;
    return result;
}

int rlk_signal_relay_restore(int signo, const struct sigaction *previous) {
    return sigaction(signo, previous, NULL);
}

int rlk_signal_relay_is_installed(int signo) {
    struct sigaction current;
    if (sigaction(signo, NULL, &current) != 0) return 0;
    return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == relay_handler;
}

unsigned long rlk_sigaction_size(void) { return sizeof(struct sigaction); }
