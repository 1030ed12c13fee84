#ifndef RUNLOOPKIT_ACCEPT_GUARD_H
#define RUNLOOPKIT_ACCEPT_GUARD_H

// libzmq 4.3.4's listeners at the descriptor limit: its ipc listener aborts the process when
// accept4 fails with EMFILE (errno_assert), and its tcp listener returns to a level-triggered
// epoll that reports the pending connection again at once, spinning a CPU for as long as the
// limit lasts. This target defines accept4, which libzmq binds to (the executable's symbol
// comes before libc's): it is libc's accept4 (looked up with dlsym(RTLD_NEXT)) except when
// a call from libzmq fails with EMFILE. Then, as libuv does, it closes a descriptor kept in
// reserve, accepts the pending connection with it and closes that at once (the client's
// libzmq reconnects later), reopens the reserve and fails with ECONNABORTED, which libzmq
// takes as a connection that went away. Calls from any other code are untouched.

/// Opens the reserve descriptor (once; later calls return 0 at once) and notes which
/// loaded object holds libzmq (the one defining zmq_ctx_new). Returns 0 or -1 with errno.
int rlk_accept_guard_prepare(void);

/// The reserve descriptor, or -1 while there is none (for tests and diagnostics).
int rlk_accept_guard_reserve(void);

/// How many pending connections were dropped at EMFILE so far.
unsigned long rlk_accept_guard_dropped(void);

/// How many times a call from libzmq failed with EMFILE and no connection could be dropped
/// (no reserve, or another thread took the descriptor it freed first).
unsigned long rlk_accept_guard_missed(void);

#endif
