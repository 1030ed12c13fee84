#ifndef RUNLOOPKIT_MALLOC_COUNTER_H
#define RUNLOOPKIT_MALLOC_COUNTER_H

// Counts heap allocations (malloc, calloc, realloc, posix_memalign, aligned_alloc,
// memalign) made by the calling thread, for alloc-counter. Linked only into that
// executable, whose definitions of these functions take the place of glibc's for the
// whole process (libzmq and the Swift runtime included) and forward to glibc's own.

/// Whether allocations are counted: false in a build with a sanitizer, which has its own
/// allocator and would clash with this one.
int rlk_malloc_counting_available(void);

/// The allocations the calling thread has made so far, but for libzmq's own (below).
unsigned long long rlk_thread_allocations(void);

/// The allocations the calling thread has made so far from libzmq's own code (the frames
/// it copies, the control blocks of the frames it is lent, its queues' chunks); told apart
/// by the allocation's caller. Zero until rlk_malloc_counter_find_libzmq() found libzmq.
unsigned long long rlk_thread_libzmq_allocations(void);

/// Finds libzmq's code in the process, so that its allocations are counted apart; call it
/// before counting. Returns whether it was found.
int rlk_malloc_counter_find_libzmq(void);

#endif
