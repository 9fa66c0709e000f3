// Job kinds and their command-line templates (see kinds.h).
#include "tools/standind/kinds.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <sys/stat.h>
#include <unistd.h>

namespace standin::swarmd {

using nlohmann::json;

namespace {

const char * const kPlaceholders[] = {"{standin}", "{bin}", "{plugin}", "{device}", "{args}"};

// Rejects a template string with an unknown {name}, so a typo is caught when the
// daemon starts instead of when a job runs.
void check_placeholders(const std::string & kind, const std::string & s) {
    for (std::size_t at = s.find('{'); at != std::string::npos; at = s.find('{', at + 1)) {
        std::size_t end = s.find('}', at);
        if (end == std::string::npos) {
            continue;
        }
        std::string name = s.substr(at, end - at + 1);
        bool known = false;
        for (const char * p : kPlaceholders) {
            known = known || name == p;
        }
        if (!known) {
            throw std::runtime_error("kind '" + kind + "': unknown placeholder " + name +
                                     " (known: {standin} {bin} {plugin} {device} {args})");
        }
    }
}

std::vector<std::string> string_list(const json & j, const std::string & what) {
    if (!j.is_array()) {
        throw std::runtime_error(what + " must be an array of strings");
    }
    std::vector<std::string> out;
    for (const json & s : j) {
        if (!s.is_string()) {
            throw std::runtime_error(what + " must be an array of strings");
        }
        out.push_back(s.get<std::string>());
    }
    return out;
}

bool executable_file(const std::string & p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

} // namespace

Kinds::Kinds(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {
    kinds_["command"]     = {{"{args}"}, {}};
    kinds_["conformance"] = {{"{bin}/test-backend-ops", "test", "-b", "{device}", "{args}"},
                             {{"GGML_BACKEND_PATH", "{plugin}"}}};
    for (const char * k : {"bench", "probe", "ab"}) {
        kinds_[k] = {{"{standin}", k, "--device", "{device}", "{args}"}, {{"GGML_BACKEND_PATH", "{plugin}"}}};
    }
}

void Kinds::apply(const json & config) {
    if (auto v = config.find("vars"); v != config.end()) {
        if (!v->is_object()) {
            throw std::runtime_error("'vars' must be an object of strings");
        }
        for (auto it = v->begin(); it != v->end(); ++it) {
            if (!it->is_string() || (it.key() != "standin" && it.key() != "bin" && it.key() != "plugin")) {
                throw std::runtime_error("'vars': only standin, bin and plugin can be set, as strings");
            }
            vars_[it.key()] = it->get<std::string>();
        }
    }
    auto k = config.find("kinds");
    if (k == config.end()) {
        return;
    }
    if (!k->is_object()) {
        throw std::runtime_error("'kinds' must be an object");
    }
    for (auto it = k->begin(); it != k->end(); ++it) {
        const std::string & name = it.key();
        if (name == "command") {
            throw std::runtime_error("kind 'command' runs its args as given and cannot be changed");
        }
        if (name.empty() || name.size() > 64 || name.find_first_not_of(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos) {
            throw std::runtime_error("kind '" + name + "': a kind name is letters, digits, _ and -");
        }
        if (!it->is_object() || !it->contains("argv")) {
            throw std::runtime_error("kind '" + name + "' must be an object with an \"argv\" array");
        }
        Template t;
        t.argv = string_list(it->at("argv"), "kind '" + name + "': argv");
        if (t.argv.empty()) {
            throw std::runtime_error("kind '" + name + "': argv is empty");
        }
        if (auto e = it->find("env"); e != it->end()) {
            if (!e->is_object()) {
                throw std::runtime_error("kind '" + name + "': env must be an object of strings");
            }
            for (auto ei = e->begin(); ei != e->end(); ++ei) {
                if (!ei->is_string()) {
                    throw std::runtime_error("kind '" + name + "': env must be an object of strings");
                }
                t.env[ei.key()] = ei->get<std::string>();
            }
        }
        for (const std::string & s : t.argv) check_placeholders(name, s);
        for (const auto & [key, val] : t.env) check_placeholders(name, val);
        for (auto ek = it->begin(); ek != it->end(); ++ek) {
            if (ek.key() != "argv" && ek.key() != "env") {
                throw std::runtime_error("kind '" + name + "': unknown field '" + ek.key() + "'");
            }
        }
        kinds_[name] = std::move(t);
    }
}

std::vector<std::string> Kinds::names() const {
    std::vector<std::string> out;
    for (const auto & [name, t] : kinds_) {
        out.push_back(name);
    }
    return out;
}

std::string Kinds::var(const std::string & name) const {
    auto it = vars_.find(name);
    return it != vars_.end() ? it->second : std::string();
}

std::string Kinds::subst(const std::string & s, const std::string & device, bool * used_plugin) const {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        bool hit = false;
        for (const char * p : kPlaceholders) {
            std::string ph(p);
            if (ph != "{args}" && s.compare(i, ph.size(), ph) == 0) {
                std::string key = ph.substr(1, ph.size() - 2);
                auto        v   = vars_.find(key);
                out += key == "device" ? device : (v != vars_.end() ? v->second : std::string());
                if (key == "plugin" && used_plugin != nullptr) *used_plugin = true;
                i += ph.size();
                hit = true;
                break;
            }
        }
        if (!hit) {
            out += s[i++];
        }
    }
    return out;
}

Command Kinds::build(const std::string & kind, const std::vector<std::string> & args,
                     const std::map<std::string, std::string> & job_env, const std::string & device) const {
    const Template & t = kinds_.at(kind);
    Command c;
    for (const std::string & a : t.argv) {
        if (a == "{args}") {
            c.argv.insert(c.argv.end(), args.begin(), args.end());
        } else {
            c.argv.push_back(subst(a, device, &c.uses_plugin));
        }
    }
    for (const auto & [k, v] : t.env) {
        bool used = false;
        c.env[k]  = subst(v, device, &used);
        // A job that sets the variable itself runs against its own choice.
        c.uses_plugin = c.uses_plugin || (used && job_env.count(k) == 0);
    }
    for (const auto & [k, v] : job_env) {
        c.env[k] = v;  // the job's own settings win over the template's
    }
    return c;
}

json read_config_file(const std::string & path) {
    std::ifstream in(path);
    if (!in) {
        throw std::runtime_error("cannot read config file " + path);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    json j = json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        throw std::runtime_error("config file " + path + " is not a JSON object");
    }
    if (j.contains("devices")) {
        string_list(j["devices"], "config file " + path + ": devices");
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() != "devices" && it.key() != "vars" && it.key() != "kinds") {
            throw std::runtime_error("config file " + path + ": unknown field '" + it.key() +
                                     "' (known: devices, vars, kinds)");
        }
    }
    return j;
}

std::string find_program(const std::string & name, const std::string & cwd, const std::string & path_var,
                         std::string & why) {
    if (name.empty()) {
        why = "the command line is empty";
        return {};
    }
    if (name.find('/') != std::string::npos) {
        std::string p = name[0] == '/' ? name : cwd + "/" + name;
        if (executable_file(p)) {
            return p;
        }
        why = "'" + name + "' is not an executable file";
        return {};
    }
    std::stringstream ss(path_var);
    for (std::string dir; std::getline(ss, dir, ':');) {
        std::string p = (dir.empty() ? cwd : dir) + "/" + name;
        if (executable_file(p)) {
            return p[0] == '/' ? p : cwd + "/" + p;
        }
    }
    why = "command '" + name + "' was not found in PATH";
    return {};
}

} // namespace standin::swarmd
