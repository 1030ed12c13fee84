#ifndef RUNLOOPKIT_SIGNAL_RELAY_H
#define RUNLOOPKIT_SIGNAL_RELAY_H

// The signal handler behind RunLoopKit's signal sources, in C because a handler may only
// do async-signal-safe work: for each descriptor registered for the signal it writes 1 to
// it (an eventfd, whose counter then holds the number of deliveries since it was read),
// and nothing else. Registration and removal are done by Swift under its own lock.
//
// In a child forked after the relay was installed for a signal, the handler writes to
// none of the eventfds (they are its parent's too): it restores the action the relay
// replaced and runs it — the program's own handler called, or the signal raised again
// for the default action — so the child handles it as it would have without RunLoopKit
// (`SIGTERM` ends it, unless the program had set otherwise).

#include <signal.h>

/// How many watchers one signal can have at once.
#define RLK_SIGNAL_RELAY_SLOTS 32

/// Registers `eventfd` for `signo`; returns its slot, or -1 if all slots are taken.
int rlk_signal_relay_add(int signo, int eventfd);

/// Unregisters a slot, then waits until no handler is still writing to the descriptor it
/// held, so that the caller may close it (and the number cannot be reused under a handler).
/// The wait sleeps on a futex the last handler in flight wakes: it never spins.
void rlk_signal_relay_remove(int signo, int slot);

/// Installs the relay as `signo`'s handler (SA_SIGINFO, SA_RESTART, other signals not masked), saving
/// the previous action in `previous`. Returns 0 or -1 with errno set.
int rlk_signal_relay_install(int signo, struct sigaction *previous);

/// Restores an action saved by `rlk_signal_relay_install`. Returns 0 or -1 with errno set.
int rlk_signal_relay_restore(int signo, const struct sigaction *previous);

/// Whether `signo`'s current action is the relay (for tests and diagnostics).
int rlk_signal_relay_is_installed(int signo);

/// The size of a `struct sigaction`, so that Swift can allocate one without naming its union.
unsigned long rlk_sigaction_size(void);

#endif
