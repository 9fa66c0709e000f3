// The CUDA implementation of the runtime interface: one Device per visible GPU,
// a blocking CUDA stream per Stream (so the synchronous buffer copies, issued on
// the legacy default stream, are ordered after all queued kernels), events
// without timing. Compiled only when nvcc is found (STANDIN_WITH_CUDA).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace standin::rt::cuda {

// Tier-3 check for CUDA runtime calls: a failure here is an internal or
// driver error, reported with the call and aborted (warn-only form below for
// cleanup paths, where aborting would hide the original problem).
void check_failed(cudaError_t err, const char * stmt, const char * file, int line);
void warn_failed(cudaError_t err, const char * stmt, const char * file, int line);

#define SI_CUDA_CHECK(stmt)                                                                         \
    do {                                                                                            \
        cudaError_t si_err_ = (stmt);                                                               \
        if (si_err_ != cudaSuccess) ::standin::rt::cuda::check_failed(si_err_, #stmt, __FILE__, __LINE__); \
    } while (0)
#define SI_CUDA_CHECK_WARN(stmt)                                                                    \
    do {                                                                                            \
        cudaError_t si_err_ = (stmt);                                                               \
        if (si_err_ != cudaSuccess) ::standin::rt::cuda::warn_failed(si_err_, #stmt, __FILE__, __LINE__); \
    } while (0)

// Peer access from device `dev` to the memory of device `peer`, enabled once
// per ordered pair: true when a kernel on dev may read peer's memory (always
// for dev == peer), false where the hardware has no peer path.
bool enable_peer(int dev, int peer);

class CudaEvent final : public Event {
public:
    explicit CudaEvent(int device);
    ~CudaEvent() override;
    void        synchronize() override;
    cudaEvent_t handle() const { return event_; }

private:
    int         device_;
    cudaEvent_t event_ = nullptr;
};

class CudaStream final : public Stream {
public:
    explicit CudaStream(int device);
    ~CudaStream() override;

    Kind kind() const override { return Kind::cuda; }

    // A stream known to be a CUDA stream, as one: the one place a stream is
    // narrowed to this type, checked against its kind.
    static CudaStream & of(Stream & s);

    void copy_to_device(void * dst, const void * src, size_t n) override;
    void copy_to_host(void * dst, const void * src, size_t n) override;
    void copy_on_device(void * dst, const void * src, size_t n) override;
    void memset(void * dst, uint8_t value, size_t n) override;
    void copy_to_device_2d(void * dst, size_t dst_stride, const void * src, size_t src_stride, size_t row_bytes,
                           size_t n_rows) override;
    void copy_to_host_2d(void * dst, size_t dst_stride, const void * src, size_t src_stride, size_t row_bytes,
                         size_t n_rows) override;
    // Across two CUDA streams (of one device or two): the copy runs on
    // `from` after this stream's queued work, and this stream waits for it.
    bool copy_from_stream(Stream & from, void * dst, const void * src, size_t n) override;

    void synchronize() override;
    void record(Event & event) override;
    void wait(Event & event) override;

    // CUDA graphs (runtime.h): a key is recorded the second time in a row it
    // is seen, then replayed while it repeats; a new key is recorded into the
    // same executable graph by update when the topology allows it.
    bool replay(const std::vector<uint8_t> & key) override;
    bool begin_recording() override;
    bool end_recording(std::vector<uint8_t> && key) override;
    bool replay_current() override;
    std::string recording_stats() const override;

    void                profile_begin() override;
    void                profile_mark() override;
    std::vector<double> profile_end() override;

    // For kernel launches: makes this stream's device current and returns the handle.
    cudaStream_t begin_launch() const;

    // Device memory for one launch's temporaries, reused by the next launch
    // (stream order keeps the uses apart), so decode graphs carry no
    // allocation nodes. nullptr when it would have to grow while a CUDA graph
    // is being recorded (allocating is not allowed then): the caller uses
    // stream-ordered memory instead. Outgrown blocks stay allocated until the
    // stream goes, because recorded graphs may still point into them.
    void * scratch(size_t bytes);
    // Keeps the first `bytes` of the scratch for a fused run whose first
    // launch writes what its last reads, while launches in between ask for
    // scratch of their own: scratch() hands out memory after them (or a new
    // block; the held bytes stay valid in the outgrown one) until released.
    void hold_scratch(size_t bytes) { scratch_held_ = bytes; }
    void release_scratch() { scratch_held_ = 0; }

    int device() const { return device_; }
    int sm_count() const { return sm_count_; }  // multiprocessors of the stream's device

    // Counters for the debug log and tests.
    struct GraphStats {
        long replays = 0, recordings = 0, updates = 0, failures = 0;
    };
    const GraphStats & graph_stats() const { return stats_; }

private:
    int          device_;
    int          sm_count_ = 1;
    cudaStream_t stream_ = nullptr;

    cudaGraphExec_t      exec_ = nullptr;
    std::vector<uint8_t> exec_key_;      // what exec_ replays
    std::vector<uint8_t> last_key_;      // the previous key run without a recording
    std::vector<uint8_t> failed_key_;    // a key whose recording failed: not tried again
    bool                 record_next_ = false;
    GraphStats           stats_;

    void *              scratch_       = nullptr;
    size_t              scratch_bytes_ = 0;
    size_t              scratch_held_  = 0;  // hold_scratch
    std::vector<void *> outgrown_;

    cudaEvent_t              handoff_ = nullptr;  // copy_from_stream's ordering point on this stream
    std::vector<cudaEvent_t> marks_;     // timing events, reused across graphs
    size_t                   n_marks_ = 0;
};

class CudaDevice final : public Device {
public:
    CudaDevice(int cuda_index, int ordinal, const cudaDeviceProp & prop);

    Kind        kind() const override { return Kind::cuda; }
    int         ordinal() const override { return ordinal_; }
    std::string description() const override { return description_; }
    std::string pci_bus_id() const override { return pci_; }
    MemoryInfo  memory() const override;

    void * alloc(size_t bytes) override;
    void   free(void * ptr) override;
    size_t alignment() const override { return 256; }  // cudaMalloc's own guarantee
    size_t max_alloc() const override { return SIZE_MAX; }
    bool   memory_is_host() const override { return false; }

    void * alloc_host(size_t bytes) override;
    void   free_host(void * ptr) override;

    void copy_to_device_sync(void * dst, const void * src, size_t n) override;
    void copy_to_host_sync(void * dst, const void * src, size_t n) override;
    void copy_on_device_sync(void * dst, const void * src, size_t n) override;
    void memset_sync(void * dst, uint8_t value, size_t n) override;

    std::unique_ptr<Stream> create_stream() override;
    std::unique_ptr<Event>  create_event() override;

    int cuda_index() const { return index_; }

private:
    int         index_;    // CUDA runtime device index
    int         ordinal_;  // standin ordinal (STANDIN_CUDA<n>)
    std::string description_;
    std::string pci_;
};

} // namespace standin::rt::cuda
