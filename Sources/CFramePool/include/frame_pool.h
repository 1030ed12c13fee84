#ifndef RUNLOOPKIT_FRAME_POOL_H
#define RUNLOOPKIT_FRAME_POOL_H

// Buffers a sending socket reuses for the frames it hands to libzmq with
// `zmq_msg_init_data`, so that a frame over libzmq's very-small-message size costs libzmq
// only its 40-byte control block instead of a `40 + size` chunk that the receiving thread
// frees (which, once it leaves glibc's fast bins, takes the arena lock on both threads).
// No libzmq call is made here: `ZMQSocket` (RunLoopZMQ) makes them all.
//
// Threads. A pool has one owner thread, the thread of the socket that sends from it:
// only it calls `rlk_frame_pool_take`, the counters below and `rlk_frame_pool_retire`.
// Any thread may call `rlk_frame_pool_give_back` (libzmq calls it on whichever thread
// closes the message: the receiver's for inproc, libzmq's I/O thread for ipc and tcp),
// before or after the retirement, even after the owner thread has exited.
//
// The design is mimalloc's thread-delayed free list. The owner takes from private free
// lists, one per size class, with no atomic operation. Other threads push a buffer they
// give back onto one shared list head with a compare-and-swap (the owner only ever takes
// the whole list, so a push cannot suffer ABA); when the owner's private list for a class
// is empty it takes the whole shared list with one atomic exchange and sorts it by class.
// Retirement swaps a mark into the shared head, frees every slot the pool holds, and
// counts the slots still out in one counter, which only retirement uses: a giver that
// sees the mark frees its slot and subtracts 1, the owner adds the number still out, and
// the operation whose result is 0 frees the pool.
//
// Size classes: 256 B, 1 KiB, 4 KiB, 16 KiB and 64 KiB of payload (see frame_pool.c for
// why), each bounded to 4 MiB of payload; a frame larger than the largest class, or one
// whose class is at its bound, gets NULL from `rlk_frame_pool_take`, and the caller falls
// back to libzmq's own allocation. Payloads are 16-byte aligned.

#include <stddef.h>

/// A pool of frame buffers. Opaque; created by `rlk_frame_pool_create`, ended by
/// `rlk_frame_pool_retire` (and freed once its last buffer is given back).
typedef struct rlk_frame_pool rlk_frame_pool;

/// The number of size classes.
#define RLK_FRAME_POOL_CLASSES 5

/// A new, empty pool owned by the calling thread (no slot is allocated until a `take`
/// needs one). NULL if out of memory.
rlk_frame_pool *rlk_frame_pool_create(void);

/// A buffer of at least `size` bytes (16-byte aligned) for the caller to fill and hand to
/// `zmq_msg_init_data` with `rlk_frame_pool_give_back` and the pool as hint; or NULL when
/// `size` exceeds the largest class, the class is at its bound, or memory is exhausted,
/// for the caller to fall back to libzmq's allocation. Owner thread only. Allocates only
/// when the class has no free slot: in a steady state, never.
void *rlk_frame_pool_take(rlk_frame_pool *pool, size_t size);

/// Gives back a buffer `rlk_frame_pool_take` returned; `hint` is its pool. Exactly
/// `zmq_free_fn`'s signature. Any thread, before or after the pool's retirement; once
/// per buffer taken.
void rlk_frame_pool_give_back(void *data, void *hint);

/// Ends the pool: frees every slot it holds now, and lets the buffers still out (inside
/// libzmq) free themselves when they are given back; the last of them frees the pool
/// (this call does when none is out). Owner thread only; the pool must not be used by
/// the owner again.
void rlk_frame_pool_retire(rlk_frame_pool *pool);

/// The class a buffer of `size` bytes comes from, or -1 if it is larger than every class.
int rlk_frame_pool_class_of(size_t size);

/// The payload size of class `size_class` (0 ..< RLK_FRAME_POOL_CLASSES).
size_t rlk_frame_pool_class_size(int size_class);

/// The most slots class `size_class` allocates in one pool.
size_t rlk_frame_pool_class_limit(int size_class);

// Counters, for tests and diagnostics. None of them is kept on the send path: the first
// two are kept where slots are allocated and freed, and `rlk_frame_pool_free` walks lists.

/// The slots of class `size_class` this pool has allocated (all still allocated: a live
/// pool frees none). Owner thread only.
size_t rlk_frame_pool_allocated(const rlk_frame_pool *pool, int size_class);

/// How many of those slots are free in the pool now, its own and those other threads have
/// given back; the rest are out (being filled by the owner, or inside libzmq). Counting
/// moves nothing: a `take` after it finds the lists as they were. Owner thread only.
size_t rlk_frame_pool_free(const rlk_frame_pool *pool, int size_class);

/// In the whole process, the pools not yet freed (a retired pool with buffers still out
/// counts) and the slots not yet freed, in any pool. Any thread.
long rlk_frame_pool_live_pools(void);
long rlk_frame_pool_live_slots(void);

#endif
