#define _GNU_SOURCE
#include "accept_guard.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*accept4_function)(int, struct sockaddr *, socklen_t *, int);

// libc's accept4 (or the next definition after this one), looked up at the first call.
static _Atomic(accept4_function) next_accept4;
// The base address of the loaded object that holds libzmq; 0 until prepared.
static _Atomic uintptr_t zmq_object_base;
// Whether a reserve is wanted (prepared) but missing: retried at the next accept4.
static atomic_bool reserve_missing;
static atomic_ulong dropped_count;
static atomic_ulong missed_count;
// The reserve descriptor; -1 when there is none. Protected by reserve_lock.
static int reserve_fd = -1;
static pthread_mutex_t reserve_lock = PTHREAD_MUTEX_INITIALIZER;

static accept4_function libc_accept4(void) {
    accept4_function function = atomic_load_explicit(&next_accept4, memory_order_acquire);
    if (function == NULL) {
        function = (accept4_function)dlsym(RTLD_NEXT, "accept4");
        atomic_store_explicit(&next_accept4, function, memory_order_release);
    }
    return function;
}

// Opens the reserve if there is none. Caller holds reserve_lock.
static void open_reserve_locked(void) {
    if (reserve_fd >= 0) return;
    // O_PATH: no permission needed on "/"; the number counts toward the limit all the same.
    reserve_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    atomic_store(&reserve_missing, reserve_fd < 0);
}

int rlk_accept_guard_prepare(void) {
    if (atomic_load(&zmq_object_base) == 0) {
        Dl_info info;
        void *symbol = dlsym(RTLD_DEFAULT, "zmq_ctx_new");
        if (symbol != NULL && dladdr(symbol, &info) != 0) {
            atomic_store(&zmq_object_base, (uintptr_t)info.dli_fbase);
        }
    }
    int saved_errno = 0;
    pthread_mutex_lock(&reserve_lock);
    open_reserve_locked();
    if (reserve_fd < 0) saved_errno = errno;
    pthread_mutex_unlock(&reserve_lock);
    if (saved_errno != 0) {
        errno = saved_errno;
        return -1;
    }
    return 0;
}

int rlk_accept_guard_reserve(void) {
    pthread_mutex_lock(&reserve_lock);
    int fd = reserve_fd;
    pthread_mutex_unlock(&reserve_lock);
    return fd;
}

unsigned long rlk_accept_guard_dropped(void) { return atomic_load(&dropped_count); }
unsigned long rlk_accept_guard_missed(void) { return atomic_load(&missed_count); }

static int called_from_zmq(void *return_address) {
    uintptr_t base = atomic_load(&zmq_object_base);
    Dl_info info;
    return base != 0 && dladdr(return_address, &info) != 0 && (uintptr_t)info.dli_fbase == base;
}

// At EMFILE: closes the reserve, accepts the pending connection on the number it freed and
// closes that, then reopens the reserve. Returns whether a connection was dropped.
static int drop_pending_connection(int listener, accept4_function accept_next) {
    int dropped = 0;
    pthread_mutex_lock(&reserve_lock);
    if (reserve_fd >= 0) {
        close(reserve_fd);
        reserve_fd = -1;
        int accepted = accept_next(listener, NULL, NULL, SOCK_CLOEXEC);
        if (accepted >= 0) {
            close(accepted);
            dropped = 1;
        }
    }
    open_reserve_locked();
    pthread_mutex_unlock(&reserve_lock);
    return dropped;
}

int accept4(int listener, struct sockaddr *address, socklen_t *length, int flags) {
    accept4_function accept_next = libc_accept4();
    if (accept_next == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (atomic_load_explicit(&reserve_missing, memory_order_relaxed)) {
        // A reserve lost at the limit (another thread took the number it freed) comes back
        // once descriptors are free again.
        pthread_mutex_lock(&reserve_lock);
        open_reserve_locked();
        pthread_mutex_unlock(&reserve_lock);
    }
    int result = accept_next(listener, address, length, flags);
    int saved_errno = errno;
    if (result >= 0 || saved_errno != EMFILE || !called_from_zmq(__builtin_return_address(0))) {
        errno = saved_errno; // as libc left it
        return result;
    }
    if (drop_pending_connection(listener, accept_next)) {
        atomic_fetch_add(&dropped_count, 1);
    } else {
        atomic_fetch_add(&missed_count, 1);
    }
    // Never EMFILE to libzmq, whose ipc listener would abort on it.
    errno = ECONNABORTED;
    return -1;
}
