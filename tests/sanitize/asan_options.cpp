// Default sanitizer options of the sanitized unit tests (linked into
// standin_unit_tests only in a -DSTANDIN_SANITIZE=ON tree). ASAN_OPTIONS in the
// environment still override them.
//
// allocator_may_return_null: an impossible allocation must come back as
// nullptr (runtime/ reports out-of-memory to ggml that way, and
// HostDevice.ImpossibleAllocationReturnsNull tests it); by default ASan aborts
// on it instead, which is its policy, not a bug of ours.
extern "C" __attribute__((visibility("default"))) const char * __asan_default_options() {
    return "allocator_may_return_null=1:detect_leaks=1";
}
