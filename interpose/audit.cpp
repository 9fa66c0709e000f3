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
std::atomic<size_t> g_local_nodes{0};
std::atomic<size_t> g_forwarded{0};
std::atomic<size_t> g_plan_replays{0};
std::atomic<const char *> g_mode{"standalone"};
}

void set_mode(const char * mode) { g_mode.store(mode); }

void count_dispatch(size_t local_nodes, size_t forwarded_graphs) {
    g_local_nodes.fetch_add(local_nodes, std::memory_order_relaxed);
    g_forwarded.fetch_add(forwarded_graphs, std::memory_order_relaxed);
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
    r.local_nodes      = g_local_nodes.load();
    r.forwarded_graphs = g_forwarded.load();
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
    s << "; dispatch: local nodes=" << local_nodes << " forwarded graphs=" << forwarded_graphs
      << " (swaps replayed for " << plan_replays << "); ggml-base copies=" << ggml_bases;
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
