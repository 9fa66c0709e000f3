// A program with one planted bug per sanitizer, run through run_sanitized.sh
// by the sanitize.canary.* tests (WILL_FAIL): they show that a sanitizer
// report fails the stage, so a clean sanitized run means something.
// Usage: sanitize_canary heap-overflow | leak | ubsan | clean
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char ** argv) {
    const char * what = argc > 1 ? argv[1] : "clean";
    // volatile: keep the compiler from proving the bugs away.
    volatile int n = 16;
    if (std::strcmp(what, "heap-overflow") == 0) {
        char * p = static_cast<char *>(std::malloc(size_t(n)));
        std::memset(p, 0, size_t(n));
        volatile char c = p[n];  // one past the end
        std::free(p);
        return c;
    }
    if (std::strcmp(what, "leak") == 0) {
        volatile void * p = std::malloc(size_t(n));
        p = nullptr;  // the only pointer is dropped
        return p != nullptr;
    }
    if (std::strcmp(what, "ubsan") == 0) {
        volatile int big = 0x7fffffff;
        const int r = big + n;  // signed overflow
        return r == 0;
    }
    std::printf("canary: clean\n");
    return 0;
}
