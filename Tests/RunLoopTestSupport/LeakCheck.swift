import Synchronization

/// Whether this process skips LeakSanitizer's check at its exit (`skipLeakCheckAtExit()`).
private let leakCheckSkipped = Atomic<Bool>(false)

/// Turns LeakSanitizer's check at exit off for this process, for a child forked from a
/// test process that then calls `exit` (its exit handlers are what it tests). In a child
/// forked from a process with threads, only the forking thread goes on: whatever the
/// parent's other threads held on their stacks alone looks leaked to LeakSanitizer, so the
/// child's report would list the parent's live objects. Processes that are not such a
/// child keep the check, and `_exit` runs none anyway. No effect without AddressSanitizer.
public func skipLeakCheckAtExit() {
    leakCheckSkipped.store(true, ordering: .relaxed)
}

/// LeakSanitizer's hook (`__lsan_is_turned_off`, sanitizer/lsan_interface.h), asked at exit:
/// nonzero skips the check. The runtime's own definition is weak; this one replaces it.
@_cdecl("__lsan_is_turned_off")
public func leakSanitizerIsTurnedOff() -> Int32 {
    leakCheckSkipped.load(ordering: .relaxed) ? 1 : 0
}
