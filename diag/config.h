// standin's configuration: one struct, filled once from the environment at
// registry init, logged once, then passed explicitly (no mutable globals).
//
// Every knob is GGML_STANDIN_<KNOB>; cross-backend knobs keep their ecosystem
// names (GGML_OP_OFFLOAD_MIN_BATCH). A value that does not parse or is out of
// range is reported with one warning and replaced by the default: a typo in an
// environment variable must never take the host process down.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace standin::diag {

struct Config {
    int  host_devices      = 1;     // GGML_STANDIN_HOST_DEVICES   0..8
    // Host devices present their memory as device memory (buffer type not
    // is_host), as a discrete GPU does: ggml then moves data with set/get
    // tensor. Needed for llama's tensor split, whose meta buffers in the
    // pinned tree cannot hold host-visible simple buffers (README, multi-device).
    bool host_discrete     = false; // GGML_STANDIN_HOST_DISCRETE  0|1
    // Host devices store weights of the packed types (the table in
    // kernels/host/packed.cpp) uploaded into their weight buffers in their
    // own layout (kernels/host/packed.h); 0 keeps the file's layout.
    bool host_repack       = true;  // GGML_STANDIN_HOST_REPACK    0|1
    // Instruction-set level of the host kernels (kernels/host/isa.h): auto
    // picks the best the CPU has; a lower one is for A/B runs.
    enum class HostIsa { auto_, avx2, avx512_vnni, avx512_amx };
    HostIsa host_isa       = HostIsa::auto_; // GGML_STANDIN_HOST_ISA  auto|avx2|avx512-vnni|avx512-amx
    int  threads           = 0;     // GGML_STANDIN_THREADS        1..512, 0 = all cores
    bool cuda              = true;  // GGML_STANDIN_CUDA           0|1
    int  offload_min_batch = 32;    // GGML_OP_OFFLOAD_MIN_BATCH   >= 0
    bool debug             = false; // GGML_STANDIN_DEBUG          0|1 (per-graph log lines)
    int  score             = 100;   // GGML_STANDIN_SCORE          0..1000000 (0 = do not load)
    // CUDA device: replay repeated graphs as CUDA graphs, and run batched
    // MUL_MAT through cuBLAS (loaded at run time) where it is present.
    bool cuda_graphs       = true;  // GGML_STANDIN_CUDA_GRAPHS    0|1
    bool cublas            = true;  // GGML_STANDIN_CUBLAS         0|1
    // CUDA device: fused launches for RMS_NORM x MUL and for MUL_MATs sharing
    // src1, with the node order that makes them adjacent (kernels/fusion.h).
    bool fusion            = true;  // GGML_STANDIN_FUSION         0|1
    // Per-op time profile of standalone graphs (timed per node, so slower),
    // printed through the log when a backend is freed.
    bool profile           = false; // GGML_STANDIN_PROFILE        0|1
    // CUDA device: the integer tensor-core product (kernels/cuda/mm_plan.h):
    // auto follows the kernel table, off never uses it, all uses it for every
    // product it can run (also where the table picks the integer mat-vec).
    enum class Mmq { auto_, off, all };
    Mmq  mmq               = Mmq::auto_; // GGML_STANDIN_MMQ    auto|off|all
    // CUDA device: programmatic dependent launch (a kernel starts while the one
    // before it drains, and waits only where it reads that one's output).
    bool pdl               = true;  // GGML_STANDIN_PDL            0|1
    // CUDA device: how many warps share one row group of the lane-per-block
    // mat-vec (mul_mat_vec_q8.cu), split along K; auto chooses by the rows
    // there are. A measuring switch: the kernel's tail waves against its splits.
    enum class MmvSplit { auto_, one, two, four };
    MmvSplit mmv_split     = MmvSplit::auto_; // GGML_STANDIN_MMV_SPLIT auto|1|2|4
    // CUDA devices: tensor split's all-reduce by standin (runtime/cuda/
    // cuda_collective.cu); off, ggml's generic all-reduce runs instead. Off
    // by default until it has run on two GPUs (scripts/gpu-check multi).
    bool cuda_comm         = false; // GGML_STANDIN_CUDA_COMM      0|1
    // CUDA device: also claim the ops whose CUDA kernels have not yet passed
    // test-backend-ops on a GPU (rows marked SI_CUDA_UNPROVEN, kernels/op_rows.h);
    // off, those ops run on the host device or the CPU backend instead.
    bool cuda_unproven     = false; // GGML_STANDIN_CUDA_UNPROVEN  0|1

    // Interposition (interpose/): standalone never loads a real library;
    // interpose requires one (and falls back to standalone, with one log line,
    // when it cannot be loaded); auto interposes when a real library is
    // configured (GGML_STANDIN_REAL) or this module is installed in replace mode.
    enum class Mode { auto_, standalone, interpose };
    Mode        mode = Mode::auto_;   // GGML_STANDIN_MODE  auto|standalone|interpose
    std::string real;                 // GGML_STANDIN_REAL  path of the real backend library
    std::string local_ops = "none";   // GGML_STANDIN_LOCAL_OPS  none|all|OP,OP,...
    bool        audit = false;        // GGML_STANDIN_AUDIT 0|1: ownership report at exit
    bool        crash_handler = false; // GGML_STANDIN_CRASH_HANDLER 0|1 (diag/crash.h)
    // GGML_STANDIN_FAULT: make one boot step fail on purpose, so `standin probe`
    // and its tests can show that each failure is found and named. One of
    // registry|devices|props|backend|alloc|copy|compute|leak; empty = none.
    // scratch: the host MUL_MAT kernel finds no scratch memory, so graph
    // compute must report GGML_STATUS_ALLOC_FAILED (out of memory), not abort.
    // perturb:OP (an op name as ggml_op_desc gives it, e.g. perturb:SOFT_MAX)
    // plants a wrong kernel instead: host devices scale that op's F32 output
    // after computing it, so `standin ab` and its tests can show it is found.
    // decline:OP plants a gap in the op table: every device declines that op
    // (supports_op and graph compute), as if it had no kernel.
    std::string fault;
    bool fault_at(const char * point) const { return fault == point; }
    bool perturbs(const char * op) const {
        return fault.size() > 8 && fault.compare(0, 8, "perturb:") == 0 && fault.compare(8, std::string::npos, op) == 0;
    }
    bool declines(const char * op) const {
        return fault.size() > 8 && fault.compare(0, 8, "decline:") == 0 && fault.compare(8, std::string::npos, op) == 0;
    }

    // Problems found while parsing, one line each (already logged by from_env).
    std::vector<std::string> warnings;

    // One line summarising the effective values, for the init log and `standin devices`.
    std::string summary() const;
};

using EnvLookup = std::function<const char *(const char *)>;

// Parses the given environment (tests pass a map; production passes getenv).
Config parse_config(const EnvLookup & env);

// The process-wide configuration, parsed and logged on first call. Thread-safe.
const Config & config();

// The names of every GGML_STANDIN_* variable standin reads (parse_config's,
// and the tools' GGML_STANDIN_SWARM_*), from the one table in config.cpp.
const std::vector<const char *> & config_var_names();

} // namespace standin::diag
