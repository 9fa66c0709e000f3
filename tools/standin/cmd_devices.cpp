// `standin devices`: what the plugin offers, through ggml's public API only,
// exactly as an application sees it.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tools/standin/backends.h"
#include "tools/standin/commands.h"

namespace standin::tools {

namespace {

nlohmann::json buft_json(ggml_backend_buffer_type_t buft) {
    nlohmann::json j;
    if (buft == nullptr) {
        return j;
    }
    j["name"]      = ggml_backend_buft_name(buft);
    j["alignment"] = ggml_backend_buft_get_alignment(buft);
    j["max_size"]  = ggml_backend_buft_get_max_size(buft);
    j["is_host"]   = ggml_backend_buft_is_host(buft);
    return j;
}

const char * type_name(enum ggml_backend_dev_type t) {
    switch (t) {
        case GGML_BACKEND_DEVICE_TYPE_CPU:   return "CPU";
        case GGML_BACKEND_DEVICE_TYPE_GPU:   return "GPU";
        case GGML_BACKEND_DEVICE_TYPE_IGPU:  return "IGPU";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "ACCEL";
        default:                             return "?";
    }
}

} // namespace

int cmd_devices(const DevicesOptions & opt) {
    Loaded l = load_backends(opt.plugin, false);
    if (l.standin == nullptr) {
        std::fprintf(stderr, "standin devices: %s\n", l.error.c_str());
        return 2;
    }
    nlohmann::json out;
    out["plugin"] = l.plugin_path;
    out["mode"]   = reg_feature(l.standin, "MODE");
    // An interposed registry reports the real library's features instead of
    // standin's build and configuration: those keys are then absent, not empty.
    const std::string cuda = reg_feature(l.standin, "CUDA");
    out["cuda_compiled"] = cuda.empty() ? nlohmann::json(nullptr) : nlohmann::json(cuda == "1");
    out["config"] = reg_feature(l.standin, "CONFIG");
    out["real"]   = reg_feature(l.standin, "REAL");
    out["fallback"] = reg_feature(l.standin, "FALLBACK");
    out["devices"] = nlohmann::json::array();
    for (size_t i = 0; i < ggml_backend_reg_dev_count(l.standin); ++i) {
        ggml_backend_dev_t dev = ggml_backend_reg_dev_get(l.standin, i);
        ggml_backend_dev_props p;
        ggml_backend_dev_get_props(dev, &p);
        nlohmann::json d;
        d["name"]         = p.name;
        d["description"]  = p.description;
        d["type"]         = type_name(p.type);
        d["memory_free"]  = p.memory_free;
        d["memory_total"] = p.memory_total;
        d["device_id"]    = p.device_id ? p.device_id : "";
        d["caps"] = {{"async", p.caps.async},
                     {"host_buffer", p.caps.host_buffer},
                     {"buffer_from_host_ptr", p.caps.buffer_from_host_ptr},
                     {"events", p.caps.events}};
        d["buffer_type"]      = buft_json(ggml_backend_dev_buffer_type(dev));
        d["host_buffer_type"] = buft_json(ggml_backend_dev_host_buffer_type(dev));
        out["devices"].push_back(d);
    }
    if (opt.json) {
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    std::printf("plugin: %s\nmode:   %s\n", l.plugin_path.c_str(), out["mode"].get<std::string>().c_str());
    for (const char * key : {"real", "config", "fallback"}) {
        const std::string v = out[key].get<std::string>();
        if (!v.empty()) std::printf("%-7s %s\n", (std::string(key) + ":").c_str(), v.c_str());
    }
    std::printf("%zu device(s)%s\n", out["devices"].size(),
                out["cuda_compiled"] == false ? " (this build has no CUDA support)" : "");
    for (const auto & d : out["devices"]) {
        std::printf("\n%s  [%s]  %s\n", d["name"].get<std::string>().c_str(), d["type"].get<std::string>().c_str(),
                    d["description"].get<std::string>().c_str());
        std::printf("  memory: %.0f MiB free of %.0f MiB\n", d["memory_free"].get<double>() / 1048576.0,
                    d["memory_total"].get<double>() / 1048576.0);
        for (const char * key : {"buffer_type", "host_buffer_type"}) {
            const auto & b = d[key];
            if (b.is_null()) {
                continue;
            }
            std::printf("  %-17s %-22s alignment %zu, %s\n", key, b["name"].get<std::string>().c_str(),
                        b["alignment"].get<size_t>(), b["is_host"].get<bool>() ? "host-visible" : "device-only");
        }
        std::printf("  caps: async=%d host_buffer=%d events=%d\n", d["caps"]["async"].get<bool>(),
                    d["caps"]["host_buffer"].get<bool>(), d["caps"]["events"].get<bool>());
    }
    return 0;
}

} // namespace standin::tools
