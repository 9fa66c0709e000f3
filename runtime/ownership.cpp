#include "runtime/ownership.h"

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace standin::rt {

namespace {

// Kept in one function-local static so that first use, from whatever library
// constructor or thread, builds it (no static-initialisation-order hazard).
struct Table {
    mutable std::shared_mutex                     mu;
    std::unordered_map<const void *, ObjRecord>   objs;
    size_t                                        created = 0;
    size_t                                        removed = 0;
};

Table & table() {
    // Never destroyed: objects may be released by other libraries' destructors
    // after ours run.
    static Table * t = new Table;
    return *t;
}

} // namespace

const char * obj_kind_name(ObjKind kind) {
    switch (kind) {
        case ObjKind::reg:         return "reg";
        case ObjKind::device:      return "device";
        case ObjKind::buffer_type: return "buffer_type";
        case ObjKind::buffer:      return "buffer";
        case ObjKind::backend:     return "backend";
        case ObjKind::event:       return "event";
        case ObjKind::opaque:      return "opaque";
        case ObjKind::count:       break;
    }
    return "?";
}

Ownership & Ownership::instance() {
    static Ownership o;
    return o;
}

void Ownership::add(const void * obj, ObjKind kind, Owner owner, const void * inner, bool permanent) {
    Table & t = table();
    std::unique_lock lock(t.mu);
    t.objs[obj] = ObjRecord{obj, kind, owner, inner, permanent};
    ++t.created;
}

bool Ownership::remove(const void * obj) {
    Table & t = table();
    std::unique_lock lock(t.mu);
    if (t.objs.erase(obj) == 0) {
        return false;
    }
    ++t.removed;
    return true;
}

bool Ownership::is_ours(const void * obj, ObjKind kind) const {
    ObjRecord r;
    return find(obj, r) && r.kind == kind && r.owner == Owner::ours;
}

bool Ownership::find(const void * obj, ObjRecord & out) const {
    Table & t = table();
    std::shared_lock lock(t.mu);
    auto it = t.objs.find(obj);
    if (it == t.objs.end()) {
        return false;
    }
    out = it->second;
    return true;
}

Ownership::Counts Ownership::counts() const {
    Table & t = table();
    std::shared_lock lock(t.mu);
    Counts c;
    for (const auto & [ptr, rec] : t.objs) {
        ++c.alive[size_t(rec.kind)];
        c.transient_alive += rec.permanent ? 0 : 1;
    }
    c.created = t.created;
    c.removed = t.removed;
    return c;
}

std::vector<ObjRecord> Ownership::snapshot() const {
    Table & t = table();
    std::shared_lock lock(t.mu);
    std::vector<ObjRecord> out;
    out.reserve(t.objs.size());
    for (const auto & [ptr, rec] : t.objs) {
        out.push_back(rec);
    }
    return out;
}

} // namespace standin::rt
