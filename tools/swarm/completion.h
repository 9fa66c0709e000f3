// Shell completion scripts generated from a CLI11 command tree, so the scripts
// can never drift from the commands the tool really has.
//
// What a value completes to comes from the option itself:
//   - a type name containing SESSION (e.g. ->type_name("SESSION")): session ids,
//     asked at completion time from the daemon with `PROG swarm ls --ids`;
//   - a type name starting with JOB (a job spec): the job kinds;
//   - a CLI::IsMember check: its members;
//   - INT / UINT / FLOAT / NUMBER: nothing (the user types a number);
//   - anything else: file names.
// Hidden commands and options (empty group) are left out.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace standin::swarm {

enum class Shell { bash, zsh };

// The completion script for `prog` (the name the user types), from `root`'s tree.
std::string completion_script(const CLI::App & root, const std::string & prog, Shell shell);

// The command tree as the scripts see it; exposed for tests.
struct CompletionOption {
    std::vector<std::string> names;        // "-h", "--help"
    bool                     takes_value = false;
    std::string              value;        // "files" | "session" | "none" | "choices a b c"
    std::string              description;
};

struct CompletionCommand {
    std::string                                      path;  // "standin swarm show"
    std::vector<std::pair<std::string, std::string>> subcommands;  // name, description
    std::vector<CompletionOption>                    options;
    std::vector<std::string>                         positionals;  // value kinds, in order
    bool                                             last_repeats = false;
};

std::vector<CompletionCommand> completion_model(const CLI::App & root, const std::string & prog);

} // namespace standin::swarm
