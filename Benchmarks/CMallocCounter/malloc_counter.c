#define _GNU_SOURCE
#include "malloc_counter.h"

#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#    define RLK_SANITIZED 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define RLK_SANITIZED 1
#endif

static __thread unsigned long long thread_allocations;
static __thread unsigned long long thread_libzmq_allocations;

// libzmq's code, found once by rlk_malloc_counter_find_libzmq() before anything is
// counted, read-only after: an allocation whose caller is in it is libzmq's own.
static uintptr_t libzmq_start, libzmq_end;

unsigned long long rlk_thread_allocations(void) { return thread_allocations; }
unsigned long long rlk_thread_libzmq_allocations(void) { return thread_libzmq_allocations; }

static int find_libzmq(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libzmq") == NULL) return 0;
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_LOAD || (header->p_flags & PF_X) == 0) continue;
        libzmq_start = info->dlpi_addr + header->p_vaddr;
        libzmq_end = libzmq_start + header->p_memsz;
        return 1;
    }
    return 0;
}

int rlk_malloc_counter_find_libzmq(void) {
    dl_iterate_phdr(find_libzmq, NULL);
    return libzmq_end > libzmq_start;
}

/// Counts one allocation for the thread, as libzmq's when `caller` is in libzmq's code.
static inline void count_allocation(void *caller) {
    uintptr_t address = (uintptr_t)caller;
    if (address >= libzmq_start && address < libzmq_end) {
        thread_libzmq_allocations++;
    } else {
        thread_allocations++;
    }
}

#ifdef RLK_SANITIZED

int rlk_malloc_counting_available(void) { return 0; }

#else

int rlk_malloc_counting_available(void) { return 1; }

// glibc's allocator under its own names.
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

void *malloc(size_t size) {
    count_allocation(__builtin_return_address(0));
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_allocation(__builtin_return_address(0));
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_allocation(__builtin_return_address(0));
    return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size) {
    count_allocation(__builtin_return_address(0));
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_allocation(__builtin_return_address(0));
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
    count_allocation(__builtin_return_address(0));
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}

#endif
