// Linux readiness and wake-up primitives that Glibc's Swift module does not
// export: epoll (the poll set), eventfd (wakeUp) and timerfd (timer deadlines).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The kernel thread id of the calling thread (`gettid` needs _GNU_SOURCE, which
/// Swift's Glibc module does not set).
static inline pid_t clinux_gettid(void) { return (pid_t)syscall(SYS_gettid); }
