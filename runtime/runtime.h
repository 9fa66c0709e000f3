// standin's device layer: devices, allocators, streams and events, with one
// implementation per kind (runtime/host, runtime/cuda; a SYCL one slots in the
// same way). Nothing here includes a ggml header: the glue translates.
//
// Contracts, stated once:
//  - Enumeration (enumerate_devices) never throws and never aborts; on driver
//    trouble a kind reports zero devices and logs one line.
//  - Allocation returns nullptr on failure (out of memory is a caller-visible
//    condition, not a crash) and logs the size asked for.
//  - Stream operations are ordered within one stream. copy/memset/launch may be
//    asynchronous; synchronize() waits for everything enqueued before it.
//  - Pointers given to a Device/Stream are that device's memory unless the
//    method name says host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace standin::rt {

enum class Kind { host, cuda, sycl };

const char * kind_name(Kind kind);

struct MemoryInfo {
    size_t free  = 0;
    size_t total = 0;
};

class Event;

class Stream {
public:
    virtual ~Stream() = default;

    // The kind of device the stream belongs to (kernels::run_node checks it
    // before handing the stream to that kind's kernels).
    virtual Kind kind() const = 0;

    virtual void copy_to_device(void * dst, const void * host_src, size_t n)   = 0;
    virtual void copy_to_host(void * host_dst, const void * src, size_t n)     = 0;
    virtual void copy_on_device(void * dst, const void * src, size_t n)        = 0;
    virtual void memset(void * dst, uint8_t value, size_t n)                   = 0;
    // Strided 2-D copies: n_rows rows of row_bytes, with the given strides.
    virtual void copy_to_device_2d(void * dst, size_t dst_stride, const void * host_src, size_t src_stride,
                                   size_t row_bytes, size_t n_rows);
    virtual void copy_to_host_2d(void * host_dst, size_t dst_stride, const void * src, size_t src_stride,
                                 size_t row_bytes, size_t n_rows);

    // Copies n bytes from `src`, memory of `from`'s device, to `dst`, memory
    // of this stream's device, without the host waiting: the copy comes after
    // the work queued so far on both streams, later work on this stream sees
    // the bytes, and later work on `from` cannot overwrite `src` before the
    // copy read it. false (nothing done) when this pair of streams cannot:
    // the caller then copies synchronously through the host.
    virtual bool copy_from_stream(Stream & from, void * dst, const void * src, size_t n) {
        (void) from, (void) dst, (void) src, (void) n;
        return false;
    }

    virtual void synchronize() = 0;
    virtual void record(Event & event) = 0;
    // Later work on this stream waits for `event` (recorded on any stream of the same device).
    virtual void wait(Event & event) = 0;

    // Worker count for host execution; device streams ignore it.
    virtual void set_threads(int n) { (void) n; }

    // Recorded replay of a repeated launch sequence (CUDA graphs; other kinds
    // answer false and the caller runs its launches as usual). `key` describes
    // the sequence completely (every launch's shapes, pointers and parameters),
    // so equal keys mean an identical sequence.
    //   replay(key): true when a recording of `key` was launched in its place.
    //   begin_recording(): true when the launches that follow are to be
    //     recorded (the stream decides: it records a key it has seen before).
    //   end_recording(key): true when the recording was launched; false when
    //     recording failed and nothing ran, so the caller must run them again.
    virtual bool replay(const std::vector<uint8_t> & key) { (void) key; return false; }
    virtual bool begin_recording() { return false; }
    virtual bool end_recording(std::vector<uint8_t> && key) { (void) key; return false; }
    //   replay_current(): launches the recording that the last successful
    //     replay or end_recording launched, with no key check: for callers
    //     that know the sequence is unchanged (a ggml graph with the same uid).
    virtual bool replay_current() { return false; }
    // One line of recording counters for the debug log; empty when none.
    virtual std::string recording_stats() const { return {}; }

    // Per-launch timing (GGML_STANDIN_PROFILE): profile_mark() after each unit
    // of work; profile_end() waits and returns the milliseconds between
    // profile_begin() and the first mark, then between consecutive marks.
    virtual void                profile_begin() = 0;
    virtual void                profile_mark()  = 0;
    virtual std::vector<double> profile_end()   = 0;
};

class Event {
public:
    virtual ~Event() = default;
    virtual void synchronize() = 0;  // blocks until the recorded work is done
};

class Device {
public:
    virtual ~Device() = default;

    virtual Kind        kind() const         = 0;
    virtual int         ordinal() const      = 0;  // index among devices of this kind
    virtual std::string description() const  = 0;
    virtual MemoryInfo  memory() const       = 0;
    // PCI bus id "dddd:bb:dd.f" when known, empty otherwise.
    virtual std::string pci_bus_id() const { return {}; }

    // Device memory.
    virtual void * alloc(size_t bytes) = 0;
    virtual void   free(void * ptr)    = 0;
    virtual size_t alignment() const   = 0;
    virtual size_t max_alloc() const   = 0;
    // Whether the CPU can read and write device memory directly.
    virtual bool   memory_is_host() const = 0;

    // Host memory staged for fast transfers (pinned). nullptr when unsupported.
    virtual void * alloc_host(size_t bytes) = 0;
    virtual void   free_host(void * ptr)    = 0;

    // Synchronous helpers for buffers (ordered after all work on every stream of the device).
    virtual void copy_to_device_sync(void * dst, const void * host_src, size_t n) = 0;
    virtual void copy_to_host_sync(void * host_dst, const void * src, size_t n)   = 0;
    virtual void copy_on_device_sync(void * dst, const void * src, size_t n)      = 0;
    virtual void memset_sync(void * dst, uint8_t value, size_t n)                 = 0;

    virtual std::unique_ptr<Stream> create_stream() = 0;
    virtual std::unique_ptr<Event>  create_event()  = 0;
};

// Every runtime device of every compiled-in kind, in a stable order: host
// devices first, then CUDA. Built once; devices live until process exit (the
// ggml registry hands out raw pointers to them and never releases them).
struct EnumerateOptions {
    int  host_devices = 1;
    int  host_threads = 0;   // 0 = all cores
    bool cuda         = true;
};

const std::vector<Device *> & enumerate_devices(const EnumerateOptions & opts);

// Whether this build contains the CUDA runtime (it may still find no device).
bool cuda_compiled();

} // namespace standin::rt
