#include "runtime/runtime.h"

#include <mutex>

#include "diag/log.h"
#include "runtime/host/host_device.h"

namespace standin::rt {

#ifdef STANDIN_WITH_CUDA
namespace cuda {
// Appends every usable CUDA device; never throws, logs once on driver trouble.
void enumerate(std::vector<Device *> & out);
}
bool cuda_compiled() { return true; }
#else
bool cuda_compiled() { return false; }
#endif

const char * kind_name(Kind kind) {
    switch (kind) {
        case Kind::host: return "host";
        case Kind::cuda: return "cuda";
        case Kind::sycl: return "sycl";
    }
    return "?";
}

void Stream::copy_to_device_2d(void * dst, size_t dst_stride, const void * src, size_t src_stride,
                               size_t row_bytes, size_t n_rows) {
    for (size_t r = 0; r < n_rows; ++r) {
        copy_to_device(static_cast<char *>(dst) + r * dst_stride,
                       static_cast<const char *>(src) + r * src_stride, row_bytes);
    }
}

void Stream::copy_to_host_2d(void * dst, size_t dst_stride, const void * src, size_t src_stride,
                             size_t row_bytes, size_t n_rows) {
    for (size_t r = 0; r < n_rows; ++r) {
        copy_to_host(static_cast<char *>(dst) + r * dst_stride,
                     static_cast<const char *>(src) + r * src_stride, row_bytes);
    }
}

const std::vector<Device *> & enumerate_devices(const EnumerateOptions & opts) {
    // Devices live as long as the process (ggml holds device pointers until
    // exit, and a device's worker threads must not be joined from static
    // destructors). The list is never destroyed either: a static vector would
    // be freed at exit and leave its devices unreachable, which LeakSanitizer
    // rightly reports as a leak.
    static std::vector<Device *> & devices = *new std::vector<Device *>();
    static std::once_flag once;
    std::call_once(once, [&] {
        for (int i = 0; i < opts.host_devices; ++i) {
            devices.push_back(new host::HostDevice(i, opts.host_threads));
        }
#ifdef STANDIN_WITH_CUDA
        if (opts.cuda) {
            cuda::enumerate(devices);
        }
#endif
    });
    return devices;
}

} // namespace standin::rt
