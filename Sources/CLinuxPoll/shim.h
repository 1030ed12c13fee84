// Linux readiness and wake-up primitives that Glibc's Swift module does not
// export: epoll (the poll set), eventfd and futex (wakeUp), timerfd (timer deadlines),
// pidfd and waitid (child-process sources), and libdispatch's main-queue hooks.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The kernel thread id of the calling thread (`gettid` needs _GNU_SOURCE, which
/// Swift's Glibc module does not set).
static inline pid_t clinux_gettid(void) { return (pid_t)syscall(SYS_gettid); }

#include <linux/time_types.h>
#include <stdint.h>
/// The number of `epoll_pwait2`: 441 on x86_64, aarch64 and every architecture with the
/// generic system call table, where the headers are too old to name it.
static inline long clinux_epoll_pwait2_number(void) {
#ifdef SYS_epoll_pwait2
    return SYS_epoll_pwait2;
#else
    return 441;
#endif
}

/// `epoll_pwait2` (Linux 5.11) through `syscall(2)`, so that the package links against a
/// glibc older than 2.35, which has no wrapper: waits at most `timeout_ns` nanoseconds
/// (negative: no timeout), with no signal mask. Returns the number of ready events, or -1
/// with errno set (ENOSYS where the kernel lacks the call).
static inline int clinux_epoll_pwait2(int epfd, struct epoll_event *events, int maxevents, int64_t timeout_ns) {
    struct __kernel_timespec timeout;
    struct __kernel_timespec *timeout_pointer = NULL;
    if (timeout_ns >= 0) {
        timeout.tv_sec = timeout_ns / 1000000000;
        timeout.tv_nsec = timeout_ns % 1000000000;
        timeout_pointer = &timeout;
    }
    return (int)syscall(clinux_epoll_pwait2_number(), epfd, events, maxevents, timeout_pointer, NULL, 0);
}

#include <fcntl.h>
/// Open-file-description locks (F_OFD_SETLK / F_OFD_GETLK), which glibc hides behind
/// _GNU_SOURCE: held per open file, released by the kernel when the holder dies, and
/// testable without taking them. Returns 0 on success, -1 with errno set.
static inline int clinux_ofd_lock(int fd, int exclusive, int test_only, int *held_by_other) {
    struct flock lock = { 0 };
    lock.l_type = exclusive ? F_WRLCK : F_RDLCK;
    lock.l_whence = SEEK_SET;
    int rc = fcntl(fd, test_only ? 36 /* F_OFD_GETLK */ : 37 /* F_OFD_SETLK */, &lock);
    if (rc == 0 && test_only && held_by_other) *held_by_other = (lock.l_type != F_UNLCK);
    return rc;
}

#include <pthread.h>
/// Names the calling thread (`pthread_setname_np`, which glibc also hides behind
/// _GNU_SOURCE). Linux takes at most 15 bytes plus the NUL; longer names fail with ERANGE.
static inline int clinux_set_thread_name(const char *name) {
    extern int pthread_setname_np(pthread_t thread, const char *name);
    return pthread_setname_np(pthread_self(), name);
}

#include <sys/prctl.h>
/// Sets the calling thread's timer slack (`prctl(PR_SET_TIMERSLACK)`, variadic in C), the
/// time the kernel may add to its timed sleeps to batch wake-ups; Linux's default is 50 µs.
static inline int clinux_set_timer_slack(unsigned long nanoseconds) {
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0);
}

/// The calling thread's timer slack in nanoseconds (`prctl(PR_GET_TIMERSLACK)`).
static inline long clinux_get_timer_slack(void) {
    return (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
}

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
/// For tests of fallbacks only: makes system call `nr` fail with `errno_value` on the
/// calling thread and the threads it creates from now on, as on a kernel without the call
/// (a seccomp filter, after `PR_SET_NO_NEW_PRIVS`; irreversible). Returns 0, or -1 with
/// errno set where seccomp is not available.
static inline int clinux_deny_system_call_for_tests(long nr, int errno_value) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned int)errno_value & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = { .len = (unsigned short)(sizeof filter / sizeof filter[0]), .filter = filter };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
}

#include <linux/futex.h>
#include <stdint.h>
#include <time.h>
/// `deadline_ns` (absolute nanoseconds on CLOCK_MONOTONIC) in `*deadline`, returned; NULL
/// for UINT64_MAX, no deadline: what a futex call takes as its timeout.
static inline struct timespec *clinux_deadline(uint64_t deadline_ns, struct timespec *deadline) {
    if (deadline_ns == UINT64_MAX) return NULL;
    deadline->tv_sec = (time_t)(deadline_ns / 1000000000u);
    deadline->tv_nsec = (long)(deadline_ns % 1000000000u);
    return deadline;
}

/// Sleeps while `*word == expected` (`FUTEX_WAIT_BITSET`, process-private), until woken,
/// or until `deadline_ns` on CLOCK_MONOTONIC (absolute nanoseconds; UINT64_MAX: no
/// deadline). Returns 0 when woken (maybe spuriously), -1 with errno ETIMEDOUT, EAGAIN
/// (the word no longer held `expected`) or EINTR.
static inline int clinux_futex_wait_operation(uint32_t *word, uint32_t expected, uint64_t deadline_ns, int operation) {
    struct timespec deadline;
    struct timespec *timeout = clinux_deadline(deadline_ns, &deadline);
    return (int)syscall(SYS_futex, word, operation, expected, timeout, NULL, FUTEX_BITSET_MATCH_ANY);
}

static inline int clinux_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
    return clinux_futex_wait_operation(word, expected, deadline_ns, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG);
}

/// Wakes one thread sleeping in `clinux_futex_wait` on `word`. Returns how many woke.
static inline int clinux_futex_wake(uint32_t *word) {
    return (int)syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

/// Wakes every thread sleeping in `clinux_futex_wait` on `word`. Returns how many woke.
static inline int clinux_futex_wake_all(uint32_t *word) {
    return (int)syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT32_MAX, NULL, NULL, 0);
}

/// `clinux_futex_wait` on a word that other processes map too (a `MAP_SHARED` mapping of
/// a memory file): the futex is keyed by the memory, not the process. Same returns.
static inline int clinux_futex_wait_shared(uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
    return clinux_futex_wait_operation(word, expected, deadline_ns, FUTEX_WAIT_BITSET);
}

/// Wakes every waiter of `clinux_futex_wait_shared` on `word`, in any process. Returns how many woke.
static inline int clinux_futex_wake_shared(uint32_t *word) {
    return (int)syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/// One word of a `clinux_futex_waitv` (the kernel's `struct futex_waitv`, Linux 5.16).
struct clinux_futex_waitv {
    uint64_t value;
    uint64_t address;
    uint32_t flags;
    uint32_t reserved;
};

/// `FUTEX2_SIZE_U32` and `FUTEX2_PRIVATE` (`<linux/futex.h>`, 5.16): a 32-bit word, keyed
/// by the memory (shared) or by this process (private).
static const uint32_t clinux_futex2_shared_u32 = 0x02;
static const uint32_t clinux_futex2_private_u32 = 0x02 | 128;

/// Sleeps while every `words[i]` holds its value (`futex_waitv(2)`), until one is woken, or
/// until `deadline_ns` on CLOCK_MONOTONIC (absolute; UINT64_MAX: none). Returns the index
/// of the word woken, or -1 with errno ETIMEDOUT, EAGAIN (a word no longer held its
/// value), EINTR, or ENOSYS (a kernel before 5.16).
static inline int clinux_futex_waitv(struct clinux_futex_waitv *words, unsigned count, uint64_t deadline_ns) {
    struct timespec deadline;
    struct timespec *timeout = clinux_deadline(deadline_ns, &deadline);
    // 449 on x86_64, aarch64 and every architecture with the generic table, where the
    // headers are too old to name it; a kernel without it answers ENOSYS.
#ifdef SYS_futex_waitv
    return (int)syscall(SYS_futex_waitv, words, count, 0, timeout, CLOCK_MONOTONIC);
#else
    return (int)syscall(449, words, count, 0, timeout, CLOCK_MONOTONIC);
#endif
}

#include <pthread.h>
/// Makes `*mutex` a lock that threads of several processes take (`PTHREAD_PROCESS_SHARED`)
/// and that the kernel releases, marked `FUTEX_OWNER_DIED`, when its holder thread ends
/// (`PTHREAD_MUTEX_ROBUST`: the holder's robust list). Returns 0 or an errno value.
static inline int clinux_robust_mutex_init(pthread_mutex_t *mutex) {
    pthread_mutexattr_t attributes;
    int result = pthread_mutexattr_init(&attributes);
    if (result != 0) return result;
    result = pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    if (result == 0) result = pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    if (result == 0) result = pthread_mutex_init(mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return result;
}

#include <signal.h>
#include <sys/wait.h>
/// Opens a descriptor that refers to process `pid` and becomes readable when it exits
/// (`pidfd_open`, Linux 5.3; glibc 2.36's wrapper is not in every sysroot). -1 with errno
/// ENOSYS where the kernel lacks it.
static inline int clinux_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    return (int)syscall(434, pid, 0);
#endif
}

/// `waitid` for the child a pidfd refers to (`P_PIDFD`, Linux 5.4), without blocking.
/// Returns 0 and fills `info` (si_pid 0 if it has not exited), -1 with errno set.
static inline int clinux_waitid_pidfd(int pidfd, siginfo_t *info) {
    return waitid((idtype_t)3 /* P_PIDFD */, (id_t)pidfd, info, WEXITED | WNOHANG);
}

/// `waitid` for child `pid`, without blocking: the fallback where pidfds are missing.
static inline int clinux_waitid_pid(pid_t pid, siginfo_t *info) {
    return waitid(P_PID, (id_t)pid, info, WEXITED | WNOHANG);
}

/// The pid and the status of a `siginfo_t` that `waitid` filled (its union's fields).
static inline pid_t clinux_siginfo_pid(const siginfo_t *info) { return info->si_pid; }
static inline int clinux_siginfo_code(const siginfo_t *info) { return info->si_code; }
static inline int clinux_siginfo_status(const siginfo_t *info) { return info->si_status; }

// libdispatch's hooks for a run loop that services the main queue, exported by
// libdispatch.so for Core Foundation's run loop and used by it on Linux: the main
// queue's eventfd, written whenever work is queued to it, and the call that drains the
// queue on the main thread.
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *_Nullable msg);

// No <errno.h> or <string.h> here: the errno constants come from Linux's own headers,
// which no module map covers, and the first module to include them owns them, so the
// Glibc module's @inlinable users (SystemCall.swift's EINTR) would lose them in release
// builds. errno is reached through glibc's accessor, the string calls through builtins.
#include <sys/socket.h>
#include <sys/un.h>
extern int *__errno_location(void);
#define CLINUX_SET_ERRNO(value) (*__errno_location() = (value))
#define CLINUX_ENAMETOOLONG 36
#define CLINUX_EINVAL 22
/// The most descriptors one `SCM_RIGHTS` message carries on Linux (`SCM_MAX_FD`).
#define CLINUX_MAX_PASSED_DESCRIPTORS 253

/// Fills `address` with the unix socket path `path`; -1 with errno ENAMETOOLONG if it does
/// not fit `sun_path` with its NUL.
static inline int clinux_unix_address(const char *path, struct sockaddr_un *address) {
    size_t length = __builtin_strlen(path);
    __builtin_memset(address, 0, sizeof *address);
    if (length + 1 > sizeof address->sun_path) { CLINUX_SET_ERRNO(CLINUX_ENAMETOOLONG); return -1; }
    address->sun_family = AF_UNIX;
    __builtin_memcpy(address->sun_path, path, length + 1);
    return 0;
}

/// `bind(2)` of unix socket `fd` to `path`. Returns 0, or -1 with errno set.
static inline int clinux_bind_unix(int fd, const char *path) {
    struct sockaddr_un address;
    if (clinux_unix_address(path, &address) != 0) return -1;
    return bind(fd, (const struct sockaddr *)&address, sizeof address);
}

/// `connect(2)` of unix socket `fd` to `path`. Returns 0, or -1 with errno set (EAGAIN for
/// a non-blocking socket whose listener's backlog is full).
static inline int clinux_connect_unix(int fd, const char *path) {
    struct sockaddr_un address;
    if (clinux_unix_address(path, &address) != 0) return -1;
    return connect(fd, (const struct sockaddr *)&address, sizeof address);
}

/// `accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC` (glibc hides `accept4` behind _GNU_SOURCE).
static inline int clinux_accept_nonblocking(int fd) {
    extern int accept4(int, struct sockaddr *, socklen_t *, int);
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// `getsockopt(SO_PEERCRED)`: the pid, uid and gid of the process that made the other end
/// of unix socket `fd`, as the kernel recorded them at `connect`/`socketpair` (`struct
/// ucred` needs _GNU_SOURCE; its layout is these three in this order).
static inline int clinux_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct { pid_t pid; uid_t uid; gid_t gid; } credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, &credentials, &length) != 0) return -1;
    *pid = credentials.pid; *uid = credentials.uid; *gid = credentials.gid;
    return 0;
}

/// `sendmsg(2)` of `count` bytes with `fd_count` (at most 253) descriptors in one
/// `SCM_RIGHTS` control message, never waiting and never raising SIGPIPE
/// (`MSG_DONTWAIT | MSG_NOSIGNAL`). Returns the bytes sent, or -1 with errno set.
static inline ssize_t clinux_send_descriptors(int fd, const void *bytes, size_t count, const int *fds, int fd_count) {
    union { char buffer[CMSG_SPACE(sizeof(int) * CLINUX_MAX_PASSED_DESCRIPTORS)]; struct cmsghdr align; } control;
    struct iovec vector = { (void *)bytes, count };
    struct msghdr message;
    __builtin_memset(&message, 0, sizeof message);
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    if (fd_count < 0 || fd_count > CLINUX_MAX_PASSED_DESCRIPTORS) { CLINUX_SET_ERRNO(CLINUX_EINVAL); return -1; }
    if (fd_count > 0) {
        __builtin_memset(&control, 0, sizeof control);
        message.msg_control = control.buffer;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)fd_count);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)fd_count);
        __builtin_memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)fd_count);
    }
    return sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/// `recvmsg(2)` of one packet into `bytes`, never waiting, its descriptors made
/// close-on-exec as they arrive (`MSG_DONTWAIT | MSG_CMSG_CLOEXEC`): every descriptor of
/// every `SCM_RIGHTS` message goes into `fds` (room for 253, the most one packet carries)
/// and `*fd_count`; `*flags` gets the packet's `msg_flags` (`MSG_TRUNC`: bytes cut off,
/// `MSG_CTRUNC`: control data cut off). Returns the bytes received, or -1 with errno set.
static inline ssize_t clinux_receive_descriptors(int fd, void *bytes, size_t count, int *fds, int *fd_count, int *flags) {
    union { char buffer[CMSG_SPACE(sizeof(int) * CLINUX_MAX_PASSED_DESCRIPTORS)]; struct cmsghdr align; } control;
    struct iovec vector = { bytes, count };
    struct msghdr message;
    __builtin_memset(&message, 0, sizeof message);
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.buffer;
    message.msg_controllen = sizeof control.buffer;
    *fd_count = 0;
    *flags = 0;
    ssize_t received = recvmsg(fd, &message, MSG_DONTWAIT | 0x40000000 /* MSG_CMSG_CLOEXEC */);
    if (received < 0) return -1;
    *flags = message.msg_flags;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n && *fd_count < CLINUX_MAX_PASSED_DESCRIPTORS; i++) {
            __builtin_memcpy(&fds[*fd_count], CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            *fd_count += 1;
        }
    }
    return received;
}
