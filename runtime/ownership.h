// Note [object ownership]
// Every ggml ABI object standin creates (reg, device, buffer type, buffer,
// backend, event) is entered here with its kind and, when it wraps an object
// of a real library, the inner pointer. "Is this object ours?" is answered by a
// lookup here, never by comparing function pointers. The audit walks the same
// table: what is alive, what leaked, and whether a real-library pointer ever
// reached the caller.
//
// Only opaque pointers are stored, so this file needs no ggml header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace standin::rt {

// opaque: handles the real library hands out that are not ABI objects (graph
// plans, thread pools, communicators), wrapped all the same.
enum class ObjKind : uint8_t { reg, device, buffer_type, buffer, backend, event, opaque, count };
enum class Owner : uint8_t { ours, real };

const char * obj_kind_name(ObjKind kind);

struct ObjRecord {
    const void * obj   = nullptr;
    ObjKind      kind  = ObjKind::reg;
    Owner        owner = Owner::ours;
    const void * inner = nullptr;  // the wrapped real object, or nullptr
    bool         permanent = false; // lives until process exit (reg, devices, bufts)
};

class Ownership {
public:
    static Ownership & instance();

    void add(const void * obj, ObjKind kind, Owner owner = Owner::ours, const void * inner = nullptr,
             bool permanent = false);
    // Returns false when obj was not registered (a double free or a foreign object).
    bool remove(const void * obj);

    bool is_ours(const void * obj, ObjKind kind) const;
    bool find(const void * obj, ObjRecord & out) const;

    struct Counts {
        size_t alive[size_t(ObjKind::count)] = {};
        size_t transient_alive = 0;  // alive and not permanent: leaks at unload
        size_t created = 0;
        size_t removed = 0;
    };
    Counts counts() const;
    std::vector<ObjRecord> snapshot() const;

private:
    Ownership() = default;
};

} // namespace standin::rt
