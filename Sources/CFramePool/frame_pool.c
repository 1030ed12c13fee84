#include "frame_pool.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

// libzmq orders everything the owner did before a send before the free callback on
// another thread (its pipes' lock-free queues, its mailboxes), but it is not built with
// ThreadSanitizer, which cannot see that. In a ThreadSanitizer build, a slot taken is
// therefore released to it and a slot given back acquired from it, which says exactly
// that; in any other build these compile to nothing. (What the owner writes after `take`,
// the payload, is ordered before a giver's free by the giver's acquiring load of RETIRED.)
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RLK_FRAME_POOL_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RLK_FRAME_POOL_TSAN 1
#endif
#ifdef RLK_FRAME_POOL_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define HANDED_OUT(slot) __tsan_release(slot)
#define GIVEN_BACK(slot) __tsan_acquire(slot)
#else
#define HANDED_OUT(slot) ((void)0)
#define GIVEN_BACK(slot) ((void)0)
#endif

// Size classes. Frames of 33 bytes or less never come here (libzmq keeps them inside its
// `zmq_msg_t`, and `ZMQSocket` sends them from the stack). The first class covers the
// common case, a port message's frame of a few dozen to a couple of hundred bytes; each
// class is four times the one before, so five lists cover up to 64 KiB and a frame holds
// at most four times its size while it is in flight. Above 64 KiB a frame falls back to
// libzmq's allocation: copying it costs microseconds, the allocator's lock tens of
// nanoseconds, so a pool would buy nothing measurable and would keep large blocks.
static const size_t class_sizes[RLK_FRAME_POOL_CLASSES] = {256, 1024, 4096, 16384, 65536};

// Each class holds at most this much payload: 16,384 slots of 256 B (many times a
// connection's default high-water marks of small frames), down to 64 slots of 64 KiB;
// at most 20 MiB per pool, reached only by a sender that far ahead of its receivers.
#define CLASS_BUDGET ((size_t)4 << 20)

// A slot: this header, then the payload, which is what `take` returns.
struct slot {
    // The next slot on whichever list holds this one. Written by the thread that holds
    // the slot: the owner for its private lists, a giver just before its CAS publishes
    // the slot (and the owner's acquiring exchange reads it); not used while the slot is
    // out (filled by the owner, then inside libzmq).
    struct slot *next;
    // The slot's class: written once by the owner when it allocates the slot, before the
    // slot is ever handed to libzmq; read by the owner.
    uint32_t size_class;
    uint32_t unused;
};
#define SLOT_HEADER 16
_Static_assert(sizeof(struct slot) == SLOT_HEADER, "the payload follows a 16-byte header");
_Static_assert(SLOT_HEADER % 16 == 0, "payloads stay 16-byte aligned");

// The shared head's value once the pool is retired. Slots are 16-byte aligned, so no
// slot's address is 1.
#define RETIRED ((uintptr_t)1)

struct rlk_frame_pool {
    // Owner thread only, no synchronization: its free slots of each class (LIFO), and
    // how many slots of each class it has allocated (a live pool frees none).
    struct slot *private_free[RLK_FRAME_POOL_CLASSES];
    size_t allocated[RLK_FRAME_POOL_CLASSES];

    // Shared, on a cache line of its own, away from the owner's fields. Any thread:
    // givers push a slot with a CAS (release); the owner takes the whole list with an
    // exchange (acquire), and retirement swaps in RETIRED, after which givers free
    // their slot instead. 0 is the empty list.
    alignas(64) _Atomic(uintptr_t) shared;
    // Only once retired: starts at 0; each giver that sees RETIRED subtracts 1, the owner
    // adds the number of slots still out when it retires; the operation whose result is
    // 0 frees the pool. Both sides acq_rel, so whoever frees sees every other access.
    _Atomic(intptr_t) retired_out;
};

// Process-wide counts, for tests: changed only where a pool or a slot is allocated or
// freed (never per frame in a steady state). Any thread; relaxed.
static _Atomic long live_pools;
static _Atomic long live_slots;

static inline int class_of(size_t size) {
    if (size <= 256) return 0;
    if (size <= 1024) return 1;
    if (size <= 4096) return 2;
    if (size <= 16384) return 3;
    if (size <= 65536) return 4;
    return -1;
}

/// Owner thread: the payload of a slot leaving the pool.
static inline void *hand_out(struct slot *slot) {
    HANDED_OUT(slot);
    return (char *)slot + SLOT_HEADER;
}

rlk_frame_pool *rlk_frame_pool_create(void) {
    // The size is a multiple of the 64-byte alignment (the shared head's), as
    // aligned_alloc requires.
    rlk_frame_pool *pool = aligned_alloc(alignof(rlk_frame_pool), sizeof(rlk_frame_pool));
    if (!pool) return NULL;
    for (int c = 0; c < RLK_FRAME_POOL_CLASSES; c++) {
        pool->private_free[c] = NULL;
        pool->allocated[c] = 0;
    }
    atomic_init(&pool->shared, 0);
    atomic_init(&pool->retired_out, 0);
    atomic_fetch_add_explicit(&live_pools, 1, memory_order_relaxed);
    return pool;
}

/// Owner thread: moves every slot given back so far onto the private lists.
static void collect_given_back(rlk_frame_pool *pool) {
    // A relaxed look first: the exchange would take the line from the givers for nothing.
    if (atomic_load_explicit(&pool->shared, memory_order_relaxed) == 0) return;
    struct slot *list =
        (struct slot *)atomic_exchange_explicit(&pool->shared, 0, memory_order_acquire);
    while (list) {
        struct slot *next = list->next;
        list->next = pool->private_free[list->size_class];
        pool->private_free[list->size_class] = list;
        list = next;
    }
}

static void *take_slow(rlk_frame_pool *pool, int c) {
    collect_given_back(pool);
    struct slot *slot = pool->private_free[c];
    if (slot) {
        pool->private_free[c] = slot->next;
        return hand_out(slot);
    }
    if (pool->allocated[c] >= CLASS_BUDGET / class_sizes[c]) return NULL;
    slot = aligned_alloc(16, SLOT_HEADER + class_sizes[c]);
    if (!slot) return NULL;
    slot->next = NULL;
    slot->size_class = (uint32_t)c;
    slot->unused = 0;
    pool->allocated[c] += 1;
    atomic_fetch_add_explicit(&live_slots, 1, memory_order_relaxed);
    return hand_out(slot);
}

void *rlk_frame_pool_take(rlk_frame_pool *pool, size_t size) {
    int c = class_of(size);
    if (c < 0) return NULL;
    struct slot *slot = pool->private_free[c];
    if (__builtin_expect(slot != NULL, 1)) {
        pool->private_free[c] = slot->next;
        return hand_out(slot);
    }
    return take_slow(pool, c);
}

static void free_pool(rlk_frame_pool *pool) {
    atomic_fetch_sub_explicit(&live_pools, 1, memory_order_relaxed);
    free(pool);
}

void rlk_frame_pool_give_back(void *data, void *hint) {
    rlk_frame_pool *pool = hint;
    struct slot *slot = (struct slot *)((char *)data - SLOT_HEADER);
    GIVEN_BACK(slot);
    // Acquire, for RETIRED: the owner's writes to the slot (and its pool) before the
    // retirement happen before the free below.
    uintptr_t head = atomic_load_explicit(&pool->shared, memory_order_acquire);
    for (;;) {
        if (head == RETIRED) {
            free(slot);
            atomic_fetch_sub_explicit(&live_slots, 1, memory_order_relaxed);
            if (atomic_fetch_sub_explicit(&pool->retired_out, 1, memory_order_acq_rel) == 1) {
                free_pool(pool);
            }
            return;
        }
        slot->next = (struct slot *)head;
        if (atomic_compare_exchange_weak_explicit(&pool->shared, &head, (uintptr_t)slot,
                                                  memory_order_release, memory_order_acquire)) {
            return;
        }
    }
}

static size_t free_list(struct slot *list) {
    size_t count = 0;
    while (list) {
        struct slot *next = list->next;
        free(list);
        count += 1;
        list = next;
    }
    return count;
}

void rlk_frame_pool_retire(rlk_frame_pool *pool) {
    struct slot *given_back =
        (struct slot *)atomic_exchange_explicit(&pool->shared, RETIRED, memory_order_acq_rel);
    size_t freed = free_list(given_back);
    size_t allocated = 0;
    for (int c = 0; c < RLK_FRAME_POOL_CLASSES; c++) {
        freed += free_list(pool->private_free[c]);
        pool->private_free[c] = NULL;
        allocated += pool->allocated[c];
    }
    atomic_fetch_sub_explicit(&live_slots, (long)freed, memory_order_relaxed);
    intptr_t out = (intptr_t)(allocated - freed);
    if (out == 0) {
        // Nothing is out, so no giver can come (one that pushed is done with the pool).
        free_pool(pool);
    } else if (atomic_fetch_add_explicit(&pool->retired_out, out, memory_order_acq_rel) + out == 0) {
        // Every slot still out was given back (and freed) between the swap and this add.
        free_pool(pool);
    }
}

int rlk_frame_pool_class_of(size_t size) {
    return class_of(size);
}

size_t rlk_frame_pool_class_size(int size_class) {
    return size_class >= 0 && size_class < RLK_FRAME_POOL_CLASSES ? class_sizes[size_class] : 0;
}

size_t rlk_frame_pool_class_limit(int size_class) {
    return size_class >= 0 && size_class < RLK_FRAME_POOL_CLASSES
        ? CLASS_BUDGET / class_sizes[size_class] : 0;
}

size_t rlk_frame_pool_allocated(const rlk_frame_pool *pool, int size_class) {
    return size_class >= 0 && size_class < RLK_FRAME_POOL_CLASSES ? pool->allocated[size_class] : 0;
}

size_t rlk_frame_pool_free(const rlk_frame_pool *pool, int size_class) {
    if (size_class < 0 || size_class >= RLK_FRAME_POOL_CLASSES) return 0;
    size_t count = 0;
    for (struct slot *slot = pool->private_free[size_class]; slot; slot = slot->next) count += 1;
    // The shared list as it is now, left in place (counting must not change what a later
    // `take` finds). Only the owner, this thread, ever takes slots off it, and givers only
    // push in front of the head: the slots after the head read here stay where they are,
    // their links written before the release that published them.
    uintptr_t head = atomic_load_explicit(&pool->shared, memory_order_acquire);
    for (struct slot *slot = (struct slot *)head; slot; slot = slot->next) {
        if (slot->size_class == (uint32_t)size_class) count += 1;
    }
    return count;
}

long rlk_frame_pool_live_pools(void) {
    return atomic_load_explicit(&live_pools, memory_order_relaxed);
}

long rlk_frame_pool_live_slots(void) {
    return atomic_load_explicit(&live_slots, memory_order_relaxed);
}
