#include "interpose/audit.h"

#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "diag/log.h"
#include "runtime/ownership.h"

namespace standin::interpose::audit {

namespace {
std::atomic<size_t> g_escapes{0};
std::atomic<size_t> g_staged_nodes{0};
std::atomic<size_t> g_forwarded_nodes{0};
std::atomic<size_t> g_forwarded{0};
std::atomic<size_t> g_plan_replays{0};
std::atomic<size_t> g_staged_runs{0}, g_staged_in{0}, g_staged_out{0};
std::atomic<size_t> g_refused[size_t(Refusal::count)];
std::atomic<bool>   g_refusal_logged[size_t(Refusal::count)];
std::atomic<const char *> g_mode{"standalone"};

// Local nodes per op, with one slot per UNARY and GLU sub-op (their names are
// what LOCAL_OPS selects by).
constexpr size_t kOpSlots = size_t(GGML_OP_COUNT) + GGML_UNARY_OP_COUNT + GGML_GLU_OP_COUNT;
std::atomic<size_t> g_local_by_op[kOpSlots];

size_t op_slot(const ggml_tensor * node) {
    if (node->op == GGML_OP_UNARY) return size_t(GGML_OP_COUNT) + size_t(ggml_get_unary_op(node));
    if (node->op == GGML_OP_GLU) return size_t(GGML_OP_COUNT) + GGML_UNARY_OP_COUNT + size_t(ggml_get_glu_op(node));
    return size_t(node->op);
}

const char * slot_name(size_t slot) {
    if (slot < size_t(GGML_OP_COUNT)) return ggml_op_name(ggml_op(slot));
    slot -= size_t(GGML_OP_COUNT);
    if (slot < GGML_UNARY_OP_COUNT) return ggml_unary_op_name(ggml_unary_op(slot));
    return ggml_glu_op_name(ggml_glu_op(slot - GGML_UNARY_OP_COUNT));
}
}

void set_mode(const char * mode) { g_mode.store(mode); }

void count_forwarded(size_t nodes, size_t graphs) {
    g_forwarded_nodes.fetch_add(nodes, std::memory_order_relaxed);
    g_forwarded.fetch_add(graphs, std::memory_order_relaxed);
}

void count_local(const ggml_tensor * node, bool staged) {
    g_local_by_op[op_slot(node)].fetch_add(1, std::memory_order_relaxed);
    if (staged) g_staged_nodes.fetch_add(1, std::memory_order_relaxed);
}

void count_staging(size_t runs, size_t bytes_in, size_t bytes_out) {
    g_staged_runs.fetch_add(runs, std::memory_order_relaxed);
    g_staged_in.fetch_add(bytes_in, std::memory_order_relaxed);
    g_staged_out.fetch_add(bytes_out, std::memory_order_relaxed);
}

const char * refusal_name(Refusal why) {
    switch (why) {
        case Refusal::no_kernel:   return "no_kernel";
        case Refusal::unsupported: return "unsupported";
        case Refusal::memory:      return "memory";
        case Refusal::no_device:   return "no_device";
        case Refusal::count:       break;
    }
    return "?";
}

void count_refused(Refusal why, const char * backend, const ggml_tensor * node, const char * detail) {
    const size_t k = size_t(why);
    g_refused[k].fetch_add(1, std::memory_order_relaxed);
    if (!g_refusal_logged[k].exchange(true)) {
        SI_LOG_WARN("%s: GGML_STANDIN_LOCAL_OPS selects %s node '%s', which runs on the real library (%s: %s); "
                    "further nodes refused for this reason are only counted (GGML_STANDIN_AUDIT=1)",
                    backend, ggml_op_desc(node), node->name, refusal_name(why), detail);
    }
}

void count_plan_replay() { g_plan_replays.fetch_add(1, std::memory_order_relaxed); }

bool check_escape(const void * obj, const char * what) {
    if (obj == nullptr) {
        return true;
    }
    rt::ObjRecord r;
    if (rt::Ownership::instance().find(obj, r) && r.owner == rt::Owner::ours) {
        return true;
    }
    g_escapes.fetch_add(1);
    SI_LOG_ERROR("audit: a real-library %s pointer (%p) reached the caller", what, obj);
    return false;
}

size_t escapes() { return g_escapes.load(); }

std::vector<std::string> loaded_ggml_bases() {
    std::vector<std::string> found;
    dl_iterate_phdr(
        [](dl_phdr_info * info, size_t, void * data) {
            const char * name = info->dlpi_name;
            if (name != nullptr && name[0] != '\0') {
                const char * base = std::strrchr(name, '/');
                base = base != nullptr ? base + 1 : name;
                if (std::strncmp(base, "libggml-base.so", 15) == 0) {
                    static_cast<std::vector<std::string> *>(data)->push_back(name);
                }
            }
            return 0;
        },
        &found);
    return found;
}

Report report() {
    Report r;
    rt::Ownership::Counts c = rt::Ownership::instance().counts();
    for (size_t k = 0; k < size_t(rt::ObjKind::count) && k < 8; ++k) {
        r.alive_by_kind[k] = c.alive[k];
    }
    r.leaks   = c.transient_alive;
    r.escapes = escapes();
    r.mode    = g_mode.load();
    for (size_t slot = 0; slot < kOpSlots; ++slot) {
        const size_t n = g_local_by_op[slot].load();
        r.local_nodes += n;
        if (n != 0) r.local_by_op.emplace_back(slot_name(slot), n);
    }
    r.staged_nodes     = g_staged_nodes.load();
    r.forwarded_nodes  = g_forwarded_nodes.load();
    r.forwarded_graphs = g_forwarded.load();
    for (size_t k = 0; k < size_t(Refusal::count); ++k) r.refused[k] = g_refused[k].load();
    r.staged_runs      = g_staged_runs.load();
    r.staged_bytes_in  = g_staged_in.load();
    r.staged_bytes_out = g_staged_out.load();
    r.plan_replays     = g_plan_replays.load();
    r.ggml_bases       = loaded_ggml_bases().size();
    return r;
}

std::string Report::text() const {
    std::ostringstream s;
    s << "standin audit: mode=" << mode << "; alive";
    for (size_t k = 0; k < size_t(rt::ObjKind::count) && k < 8; ++k) {
        s << ' ' << rt::obj_kind_name(rt::ObjKind(k)) << '=' << alive_by_kind[k];
    }
    s << "; leaks=" << leaks << "; real pointers to caller=" << escapes;
    s << (leaks == 0 && escapes == 0 ? " (clean)" : " (NOT CLEAN)");
    s << "; dispatch: local nodes=" << local_nodes << " (staged " << staged_nodes << ") forwarded nodes="
      << forwarded_nodes << " forwarded graphs=" << forwarded_graphs << " (swaps replayed for " << plan_replays
      << "); refused:";
    size_t refused_total = 0;
    for (size_t k = 0; k < size_t(Refusal::count); ++k) {
        refused_total += refused[k];
        if (refused[k] != 0) s << ' ' << refusal_name(Refusal(k)) << '=' << refused[k];
    }
    if (refused_total == 0) s << " none";
    s << "; staging: runs=" << staged_runs << " in=" << staged_bytes_in << " B out=" << staged_bytes_out << " B";
    s << "; local by op:";
    for (const auto & [op, n] : local_by_op) s << ' ' << op << '=' << n;
    if (local_by_op.empty()) s << " none";
    s << "; ggml-base copies=" << ggml_bases;
    return s.str();
}

void enable_at_exit() {
    static bool installed = false;
    if (installed) {
        return;
    }
    installed = true;
    std::atexit([] {
        // stderr directly: at exit the host's log callback may be gone.
        std::fflush(stdout);
        std::fprintf(stderr, "\n%s\n", report().text().c_str());
    });
}

} // namespace standin::interpose::audit
