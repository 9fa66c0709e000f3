#include "runtime/cuda/cuda_device.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "diag/check.h"
#include "diag/config.h"
#include "runtime/cuda/cublas_lib.h"
#include "diag/log.h"

namespace standin::rt::cuda {

void check_failed(cudaError_t err, const char * stmt, const char * file, int line) {
    char detail[256];
    std::snprintf(detail, sizeof(detail), "CUDA error %d: %s", int(err), cudaGetErrorString(err));
    diag::fatal(file, line, stmt, detail);
}

void warn_failed(cudaError_t err, const char * stmt, const char * file, int line) {
    SI_LOG_WARN("%s failed at %s:%d: %s", stmt, file, line, cudaGetErrorString(err));
}

// ---- events -------------------------------------------------------------------

CudaEvent::CudaEvent(int device) : device_(device) {
    SI_CUDA_CHECK(cudaSetDevice(device_));
    SI_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
    if (event_ != nullptr) {
        SI_CUDA_CHECK_WARN(cudaEventDestroy(event_));
    }
}

void CudaEvent::synchronize() { SI_CUDA_CHECK(cudaEventSynchronize(event_)); }

// ---- streams ------------------------------------------------------------------

CudaStream & CudaStream::of(Stream & s) {
    SI_ASSERT_MSG(s.kind() == Kind::cuda, "a CUDA kernel was given another kind's stream");
    return static_cast<CudaStream &>(s);
}

CudaStream::CudaStream(int device) : device_(device) {
    SI_CUDA_CHECK(cudaSetDevice(device_));
    // A blocking stream: see cuda_device.h for why.
    SI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault));
    SI_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
}

CudaStream::~CudaStream() {
    if (stream_ != nullptr) {
        SI_CUDA_CHECK_WARN(cudaSetDevice(device_));
        SI_CUDA_CHECK_WARN(cudaStreamSynchronize(stream_));
        if (exec_ != nullptr) SI_CUDA_CHECK_WARN(cudaGraphExecDestroy(exec_));
        blas::forget_stream(stream_);
        if (scratch_ != nullptr) SI_CUDA_CHECK_WARN(cudaFree(scratch_));
        for (void * p : outgrown_) SI_CUDA_CHECK_WARN(cudaFree(p));
        for (cudaEvent_t e : marks_) SI_CUDA_CHECK_WARN(cudaEventDestroy(e));
        if (handoff_ != nullptr) SI_CUDA_CHECK_WARN(cudaEventDestroy(handoff_));
        SI_CUDA_CHECK_WARN(cudaStreamDestroy(stream_));
    }
}

void * CudaStream::scratch(size_t bytes) {
    const size_t skip = (scratch_held_ + 255) / 256 * 256;  // cudaMalloc's alignment
    if (skip + bytes <= scratch_bytes_) {
        return static_cast<char *>(scratch_) + skip;
    }
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(begin_launch(), &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return nullptr;
    }
    const size_t want = std::max(bytes, size_t(1) << 20);  // small requests share one MiB
    void * p = nullptr;
    if (cudaMalloc(&p, want) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    if (scratch_ != nullptr) outgrown_.push_back(scratch_);
    scratch_ = p;
    scratch_bytes_ = want;
    scratch_held_ = 0;  // what was held stays in the outgrown block
    return scratch_;
}

// ---- graphs -------------------------------------------------------------------
// Decode repeats the same graph token after token; launching it as one CUDA
// graph replaces hundreds of kernel launches by one. A key is recorded only
// when it repeats, so graphs that change every call (or run once) cost nothing
// beyond the key comparison.

bool CudaStream::replay(const std::vector<uint8_t> & key) {
    record_next_ = false;
    if (exec_ != nullptr && key == exec_key_) {
        SI_CUDA_CHECK(cudaGraphLaunch(exec_, begin_launch()));
        ++stats_.replays;
        return true;
    }
    if (key == last_key_ && key != failed_key_) {
        record_next_ = true;
    } else {
        last_key_ = key;
    }
    return false;
}

bool CudaStream::replay_current() {
    if (exec_ == nullptr) {
        return false;
    }
    record_next_ = false;
    SI_CUDA_CHECK(cudaGraphLaunch(exec_, begin_launch()));
    ++stats_.replays;
    return true;
}

bool CudaStream::begin_recording() {
    if (!record_next_) {
        return false;
    }
    // Thread-local capture: other threads' CUDA calls are not affected.
    const cudaError_t err = cudaStreamBeginCapture(begin_launch(), cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
        cudaGetLastError();
        failed_key_ = last_key_;
        ++stats_.failures;
        return false;
    }
    return true;
}

bool CudaStream::end_recording(std::vector<uint8_t> && key) {
    record_next_ = false;
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(stream_, &graph);
    if (err != cudaSuccess || graph == nullptr) {
        cudaGetLastError();  // a launch that cannot be captured: run eagerly, do not retry this key
        if (graph != nullptr) cudaGraphDestroy(graph);
        failed_key_ = std::move(key);
        ++stats_.failures;
        return false;
    }
    bool ready = false;
    if (exec_ != nullptr) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(exec_, graph, &info) == cudaSuccess) {
            ready = true;
            ++stats_.updates;
        } else {
            cudaGetLastError();
            SI_CUDA_CHECK_WARN(cudaGraphExecDestroy(exec_));
            exec_ = nullptr;
        }
    }
    if (!ready) {
        err = cudaGraphInstantiate(&exec_, graph, 0);
        if (err != cudaSuccess) {
            cudaGetLastError();
            exec_ = nullptr;
            cudaGraphDestroy(graph);
            failed_key_ = std::move(key);
            ++stats_.failures;
            return false;
        }
        ++stats_.recordings;
    }
    SI_CUDA_CHECK(cudaGraphDestroy(graph));
    exec_key_ = std::move(key);
    SI_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
    return true;
}

std::string CudaStream::recording_stats() const {
    return "CUDA graphs: replays=" + std::to_string(stats_.replays) + " recordings=" +
           std::to_string(stats_.recordings) + " updates=" + std::to_string(stats_.updates) +
           " failures=" + std::to_string(stats_.failures);
}

// ---- profile ------------------------------------------------------------------

void CudaStream::profile_begin() {
    n_marks_ = 0;
    profile_mark();
}

void CudaStream::profile_mark() {
    if (n_marks_ == marks_.size()) {
        cudaEvent_t e;
        SI_CUDA_CHECK(cudaSetDevice(device_));
        SI_CUDA_CHECK(cudaEventCreate(&e));
        marks_.push_back(e);
    }
    SI_CUDA_CHECK(cudaEventRecord(marks_[n_marks_++], begin_launch()));
}

std::vector<double> CudaStream::profile_end() {
    std::vector<double> ms;
    if (n_marks_ == 0) {
        return ms;
    }
    SI_CUDA_CHECK(cudaEventSynchronize(marks_[n_marks_ - 1]));
    for (size_t i = 1; i < n_marks_; ++i) {
        float t = 0.0f;
        SI_CUDA_CHECK(cudaEventElapsedTime(&t, marks_[i - 1], marks_[i]));
        ms.push_back(double(t));
    }
    n_marks_ = 0;
    return ms;
}

cudaStream_t CudaStream::begin_launch() const {
    SI_CUDA_CHECK(cudaSetDevice(device_));
    return stream_;
}

void CudaStream::copy_to_device(void * dst, const void * src, size_t n) {
    SI_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, begin_launch()));
}
void CudaStream::copy_to_host(void * dst, const void * src, size_t n) {
    SI_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, begin_launch()));
}
void CudaStream::copy_on_device(void * dst, const void * src, size_t n) {
    SI_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, begin_launch()));
}

// Direct copies between two GPUs need peer access, enabled once per ordered
// pair; where the hardware has none, cudaMemcpyPeerAsync stages through the
// host by itself, which is still asynchronous for the caller.
bool enable_peer(int dev, int peer) {
    static std::mutex                      mu;
    static std::map<std::pair<int, int>, bool> tried;
    std::lock_guard<std::mutex>            lock(mu);
    if (dev == peer) {
        return true;
    }
    if (auto it = tried.find({dev, peer}); it != tried.end()) {
        return it->second;
    }
    bool & on = tried[{dev, peer}];
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, dev, peer) != cudaSuccess || can == 0) {
        cudaGetLastError();
        return on = false;
    }
    SI_CUDA_CHECK(cudaSetDevice(dev));
    const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
    if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled) {
        SI_CUDA_CHECK_WARN(err);
        cudaGetLastError();
        return on = false;
    }
    cudaGetLastError();  // an "already enabled" is not an error to keep
    return on = true;
}

bool CudaStream::copy_from_stream(Stream & from, void * dst, const void * src, size_t n) {
    auto * other = dynamic_cast<CudaStream *>(&from);
    if (other == nullptr) {
        return false;
    }
    if (n == 0) {
        return true;
    }
    enable_peer(other->device_, device_);
    enable_peer(device_, other->device_);
    for (CudaStream * s : {this, other}) {
        if (s->handoff_ == nullptr) {
            SI_CUDA_CHECK(cudaSetDevice(s->device_));
            SI_CUDA_CHECK(cudaEventCreateWithFlags(&s->handoff_, cudaEventDisableTiming));
        }
    }
    // `from` waits for this stream's queued work (which may still read dst),
    // copies, and this stream waits for the copy.
    SI_CUDA_CHECK(cudaEventRecord(handoff_, begin_launch()));
    SI_CUDA_CHECK(cudaStreamWaitEvent(other->begin_launch(), handoff_, 0));
    SI_CUDA_CHECK(cudaMemcpyPeerAsync(dst, device_, src, other->device_, n, other->stream_));
    SI_CUDA_CHECK(cudaEventRecord(other->handoff_, other->stream_));
    SI_CUDA_CHECK(cudaStreamWaitEvent(begin_launch(), other->handoff_, 0));
    return true;
}

void CudaStream::memset(void * dst, uint8_t value, size_t n) {
    SI_CUDA_CHECK(cudaMemsetAsync(dst, value, n, begin_launch()));
}
void CudaStream::copy_to_device_2d(void * dst, size_t dst_stride, const void * src, size_t src_stride,
                                   size_t row_bytes, size_t n_rows) {
    SI_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_stride, src, src_stride, row_bytes, n_rows, cudaMemcpyHostToDevice,
                                    begin_launch()));
}
void CudaStream::copy_to_host_2d(void * dst, size_t dst_stride, const void * src, size_t src_stride,
                                 size_t row_bytes, size_t n_rows) {
    SI_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_stride, src, src_stride, row_bytes, n_rows, cudaMemcpyDeviceToHost,
                                    begin_launch()));
}
void CudaStream::synchronize() {
    SI_CUDA_CHECK(cudaSetDevice(device_));
    SI_CUDA_CHECK(cudaStreamSynchronize(stream_));
}
void CudaStream::record(Event & event) {
    SI_CUDA_CHECK(cudaEventRecord(static_cast<CudaEvent &>(event).handle(), begin_launch()));
}
void CudaStream::wait(Event & event) {
    SI_CUDA_CHECK(cudaStreamWaitEvent(begin_launch(), static_cast<CudaEvent &>(event).handle(), 0));
}

// ---- device -------------------------------------------------------------------

CudaDevice::CudaDevice(int cuda_index, int ordinal, const cudaDeviceProp & prop)
    : index_(cuda_index), ordinal_(ordinal) {
    char buf[64] = {0};
    if (cudaDeviceGetPCIBusId(buf, sizeof(buf), cuda_index) == cudaSuccess) {
        for (char * c = buf; *c; ++c) *c = char(std::tolower(static_cast<unsigned char>(*c)));
        pci_ = buf;
    } else {
        cudaGetLastError();
    }
    description_ = std::string(prop.name) + " (standin CUDA device, sm_" + std::to_string(prop.major) +
                   std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) + " SMs)";
}

MemoryInfo CudaDevice::memory() const {
    MemoryInfo m;
    SI_CUDA_CHECK(cudaSetDevice(index_));
    SI_CUDA_CHECK(cudaMemGetInfo(&m.free, &m.total));
    return m;
}

void * CudaDevice::alloc(size_t bytes) {
    SI_CUDA_CHECK(cudaSetDevice(index_));
    void * p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (err != cudaSuccess) {
        cudaGetLastError();  // out of memory is not sticky: clear it for the next call
        SI_LOG_ERROR("cudaMalloc of %.2f MiB on device %d failed: %s", double(bytes) / 1048576.0, index_,
                     cudaGetErrorString(err));
        return nullptr;
    }
    return p;
}

void CudaDevice::free(void * ptr) {
    SI_CUDA_CHECK_WARN(cudaSetDevice(index_));
    SI_CUDA_CHECK_WARN(cudaFree(ptr));
}

void * CudaDevice::alloc_host(size_t bytes) {
    void * p = nullptr;
    cudaError_t err = cudaMallocHost(&p, bytes == 0 ? 1 : bytes);
    if (err != cudaSuccess) {
        cudaGetLastError();
        SI_LOG_ERROR("cudaMallocHost of %.2f MiB failed: %s", double(bytes) / 1048576.0, cudaGetErrorString(err));
        return nullptr;
    }
    return p;
}

void CudaDevice::free_host(void * ptr) { SI_CUDA_CHECK_WARN(cudaFreeHost(ptr)); }

void CudaDevice::copy_to_device_sync(void * dst, const void * src, size_t n) {
    SI_CUDA_CHECK(cudaSetDevice(index_));
    SI_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}
void CudaDevice::copy_to_host_sync(void * dst, const void * src, size_t n) {
    SI_CUDA_CHECK(cudaSetDevice(index_));
    SI_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}
void CudaDevice::copy_on_device_sync(void * dst, const void * src, size_t n) {
    SI_CUDA_CHECK(cudaSetDevice(index_));
    SI_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
}
void CudaDevice::memset_sync(void * dst, uint8_t value, size_t n) {
    SI_CUDA_CHECK(cudaSetDevice(index_));
    SI_CUDA_CHECK(cudaMemset(dst, value, n));
    SI_CUDA_CHECK(cudaDeviceSynchronize());
}

std::unique_ptr<Stream> CudaDevice::create_stream() {
    auto stream = std::make_unique<CudaStream>(index_);
    // cuBLAS made ready with the backend (the libraries loaded, the stream's
    // handle, workspace and first call, cublas_lib.cu's warm_up) rather than
    // inside the first product that wants it: llama-batched-bench's first
    // 128-token prompt of 1B Q4_0 on the H200 took 113 ms, 47 ms after this
    // (ggml-cuda 30; results/h200/summary-68.txt, -69.txt). GGML_STANDIN_CUBLAS=0
    // loads nothing.
    if (diag::config().cublas) (void) blas::handle_for(index_, stream->begin_launch());
    return stream;
}
std::unique_ptr<Event>  CudaDevice::create_event() { return std::make_unique<CudaEvent>(index_); }

// ---- enumeration (never aborts) -----------------------------------------------

namespace {

__global__ void probe_kernel(int * p) {
    if (p != nullptr) *p = 1;
}

// Whether this build carries code the device can run (sm_90 SASS or PTX the
// driver can compile for it); older GPUs would fail at the first launch.
bool has_kernel_image(int index) {
    if (cudaSetDevice(index) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    cudaFuncAttributes attr;
    cudaError_t err = cudaFuncGetAttributes(&attr, probe_kernel);
    cudaGetLastError();
    return err == cudaSuccess;
}

} // namespace

void enumerate(std::vector<Device *> & out) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError();
        SI_LOG_INFO("no CUDA device: %s", cudaGetErrorString(err));
        return;
    }
    int ordinal = 0;
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop;
        err = cudaGetDeviceProperties(&prop, i);
        if (err != cudaSuccess) {
            cudaGetLastError();
            SI_LOG_WARN("CUDA device %d skipped: %s", i, cudaGetErrorString(err));
            continue;
        }
        if (!has_kernel_image(i)) {
            SI_LOG_WARN("CUDA device %d (%s, sm_%d%d) skipped: this build has no code for it", i, prop.name,
                        prop.major, prop.minor);
            continue;
        }
        out.push_back(new CudaDevice(i, ordinal++, prop));
    }
}

} // namespace standin::rt::cuda
