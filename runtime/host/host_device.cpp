#include "runtime/host/host_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "diag/check.h"
#include "diag/log.h"

namespace standin::rt::host {

HostStream & HostStream::of(Stream & s) {
    SI_ASSERT_MSG(s.kind() == Kind::host, "a host kernel was given another kind's stream");
    return static_cast<HostStream &>(s);
}

void HostStream::copy_to_device(void * dst, const void * src, size_t n) { std::memcpy(dst, src, n); }
void HostStream::copy_to_host(void * dst, const void * src, size_t n) { std::memcpy(dst, src, n); }
void HostStream::copy_on_device(void * dst, const void * src, size_t n) { std::memmove(dst, src, n); }
void HostStream::memset(void * dst, uint8_t value, size_t n) { std::memset(dst, value, n); }
// Work is complete when enqueued (see host_device.h), so there is nothing to record or wait for.
void HostStream::record(Event & event) { (void) event; }
void HostStream::wait(Event & event) { (void) event; }

void HostStream::profile_begin() {
    marks_.clear();
    marks_.push_back(std::chrono::steady_clock::now());
}
void HostStream::profile_mark() { marks_.push_back(std::chrono::steady_clock::now()); }
std::vector<double> HostStream::profile_end() {
    std::vector<double> ms;
    for (size_t i = 1; i < marks_.size(); ++i) {
        ms.push_back(std::chrono::duration<double, std::milli>(marks_[i] - marks_[i - 1]).count());
    }
    marks_.clear();
    return ms;
}

static std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            size_t colon = line.find(':');
            if (colon != std::string::npos) {
                size_t start = line.find_first_not_of(' ', colon + 1);
                return start == std::string::npos ? std::string() : line.substr(start);
            }
        }
    }
    return "CPU";
}

std::string HostDevice::description() const {
    int n = threads_ > 0 ? threads_ : available_cores();
    return "standin host device (" + cpu_model_name() + ", " + std::to_string(n) + " threads)";
}

MemoryInfo HostDevice::memory() const {
    MemoryInfo info;
    // MemAvailable is what the kernel can give without swapping; sysconf's
    // free pages undercount it badly on a machine with a warm page cache.
    std::ifstream in("/proc/meminfo");
    std::string key;
    size_t kb = 0;
    std::string unit;
    while (in >> key >> kb) {
        std::getline(in, unit);
        if (key == "MemTotal:") {
            info.total = kb * 1024;
        } else if (key == "MemAvailable:") {
            info.free = kb * 1024;
        }
    }
    if (info.total == 0) {
        long pages = sysconf(_SC_PHYS_PAGES);
        long avail = sysconf(_SC_AVPHYS_PAGES);
        long page  = sysconf(_SC_PAGE_SIZE);
        info.total = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
        info.free  = avail > 0 && page > 0 ? size_t(avail) * size_t(page) : 0;
    }
    return info;
}

void * HostDevice::alloc(size_t bytes) {
    // Large buffers (weights, KV cache, compute) start on a 2 MiB boundary and
    // ask for transparent huge pages: a decoded token streams every weight
    // once, and with 4 KiB pages the TLB misses cost about a tenth of the
    // bandwidth. The kernel may decline (THP off): then they are plain pages.
    const size_t align = bytes >= kHugeFrom ? kHugePage : kAlignment;
    // aligned_alloc requires a size that is a multiple of the alignment.
    size_t rounded = bytes > SIZE_MAX - align ? 0 : (bytes + align - 1) / align * align;
    if (rounded == 0 && bytes != 0) {
        SI_LOG_ERROR("out of host memory allocating %zu bytes", bytes);
        return nullptr;
    }
    if (rounded == 0) {
        rounded = align;
    }
    void * p = std::aligned_alloc(align, rounded);
    if (p == nullptr) {
        SI_LOG_ERROR("out of host memory allocating %zu bytes", bytes);
        return nullptr;
    }
#ifdef MADV_HUGEPAGE
    if (align == kHugePage) {
        madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing
    }
#endif
    return p;
}

void HostDevice::free(void * ptr) { std::free(ptr); }

void HostDevice::copy_to_device_sync(void * dst, const void * src, size_t n) { std::memcpy(dst, src, n); }
void HostDevice::copy_to_host_sync(void * dst, const void * src, size_t n) { std::memcpy(dst, src, n); }
void HostDevice::copy_on_device_sync(void * dst, const void * src, size_t n) { std::memmove(dst, src, n); }
void HostDevice::memset_sync(void * dst, uint8_t value, size_t n) { std::memset(dst, value, n); }

std::unique_ptr<Stream> HostDevice::create_stream() {
    return std::make_unique<HostStream>(threads_ > 0 ? threads_ : available_cores());
}

} // namespace standin::rt::host
