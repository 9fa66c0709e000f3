// Job kinds: how a job's kind and args become the command line a worker runs.
//
// "command" runs its args as given. The named kinds (conformance, bench, probe,
// ab) run a template: a list of strings where {standin}, {bin}, {plugin} and
// {device} are replaced, and an element that is exactly "{args}" is replaced by
// the job's args. The daemon's --config file may override a template or add a
// kind:
//   {"devices": ["STANDIN_HOST0", "STANDIN_CUDA0"],
//    "vars":    {"bin": "/path/to/llama.cpp/build/bin"},
//    "kinds":   {"conformance": {"argv": ["{bin}/test-backend-ops", "test", "-b", "{device}", "{args}"],
//                                "env":  {"GGML_BACKEND_PATH": "{plugin}"}}}}
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace standin::swarmd {

struct Template {
    std::vector<std::string>           argv;
    std::map<std::string, std::string> env;
};

struct Command {
    std::vector<std::string>           argv;
    std::map<std::string, std::string> env;  // added to the daemon's environment
    bool                               uses_plugin = false;  // the template names {plugin}
};

class Kinds {
  public:
    // The built-in templates; `vars` fills {standin}, {bin} and {plugin}.
    explicit Kinds(std::map<std::string, std::string> vars);

    // Applies a config file's "vars" and "kinds" objects; throws std::runtime_error naming the mistake.
    void apply(const nlohmann::json & config);

    bool                     has(const std::string & kind) const { return kinds_.count(kind) != 0; }
    // A variable's value ({standin}, {bin}, {plugin}); "" when unset.
    std::string              var(const std::string & name) const;
    std::vector<std::string> names() const;

    // The command line of a job of `kind` on `device` (a worker's device, never "any").
    Command build(const std::string & kind, const std::vector<std::string> & args,
                  const std::map<std::string, std::string> & job_env, const std::string & device) const;

  private:
    std::string subst(const std::string & s, const std::string & device, bool * used_plugin) const;

    std::map<std::string, std::string> vars_;
    std::map<std::string, Template>    kinds_;
};

// Reads a --config file (JSON). Throws std::runtime_error with the path and the mistake.
nlohmann::json read_config_file(const std::string & path);

// Finds the program a command line would run: a path with a slash is taken
// relative to `cwd`; a bare name is looked up in `path_var` (PATH). Returns the
// absolute file name, or "" with `why` set.
std::string find_program(const std::string & name, const std::string & cwd, const std::string & path_var,
                         std::string & why);

} // namespace standin::swarmd
