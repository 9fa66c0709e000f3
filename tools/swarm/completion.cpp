// Completion scripts from the CLI11 command tree (see completion.h).
//
// Both scripts have the same shape: a table (command path -> subcommands,
// options, options taking a value), a value table ("CMD|--opt" or "CMD|#N" ->
// what it completes to), and one function that walks the words typed so far to
// find the command, the pending option and the positional index. Only the
// tables are generated per command; the walker is fixed text.
#include "tools/swarm/completion.h"

#include <cctype>

#include <sstream>

#include <CLI/CLI.hpp>

#include "tools/swarm/protocol.h"

namespace standin::swarm {

namespace {

std::string value_kind(const CLI::Option & o) {
    std::string t = o.get_type_name();
    if (t.find("SESSION") != std::string::npos) {
        return "session";
    }
    if (t.rfind("JOB", 0) == 0) {  // a job spec starts with its kind
        std::string out = "choices";
        for (const std::string & k : builtin_kinds()) out += " " + k;
        return out;
    }
    std::size_t open = t.find('{'), close = t.find('}', open == std::string::npos ? 0 : open);
    if (open != std::string::npos && close != std::string::npos) {
        std::string members = t.substr(open + 1, close - open - 1), out = "choices";
        std::stringstream ss(members);
        for (std::string m; std::getline(ss, m, ',');) {
            out += " " + m;
        }
        return out;
    }
    for (const char * numeric : {"INT", "UINT", "FLOAT", "NUMBER"}) {
        if (t.rfind(numeric, 0) == 0) {
            return "none";
        }
    }
    return "files";
}

void walk(const CLI::App & app, const std::string & path, std::vector<CompletionCommand> & out) {
    CompletionCommand c;
    c.path = path;
    auto subs = app.get_subcommands([](const CLI::App * s) { return !s->get_group().empty(); });
    for (const CLI::App * s : subs) {
        c.subcommands.emplace_back(s->get_name(), s->get_description());
    }
    auto opts = app.get_options([](const CLI::Option * o) { return !o->get_group().empty(); });
    for (const CLI::Option * o : opts) {
        if (o->nonpositional()) {
            CompletionOption co;
            for (const std::string & s : o->get_snames()) co.names.push_back("-" + s);
            for (const std::string & l : o->get_lnames()) co.names.push_back("--" + l);
            co.takes_value = o->get_expected_max() > 0 && o->get_type_size_max() > 0;
            co.value       = co.takes_value ? value_kind(*o) : "none";
            co.description = o->get_description();
            c.options.push_back(std::move(co));
        } else if (o->get_positional()) {
            c.positionals.push_back(value_kind(*o));
            c.last_repeats = o->get_items_expected_max() > 1;
        }
    }
    out.push_back(std::move(c));
    for (const CLI::App * s : subs) {
        walk(*s, path + " " + s->get_name(), out);
    }
}

// A single-quoted shell word (valid in bash and zsh).
std::string sq(const std::string & s) {
    std::string out = "'";
    for (char ch : s) {
        out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    }
    return out + "'";
}

std::string ident(const std::string & prog) {
    std::string out;
    for (char ch : prog) {
        out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    }
    return out;
}

// One line of a description: the first line, colons escaped for zsh's _describe names.
std::string zsh_item(const std::string & name, const std::string & desc) {
    std::string n;
    for (char ch : name) n += ch == ':' ? std::string("\\:") : std::string(1, ch);
    std::string d = desc.substr(0, desc.find('\n'));
    return sq(d.empty() ? n : n + ":" + d);
}

// The value table, shared by both shells: "CMD|--opt" and "CMD|#N" -> kind.
void value_table(std::ostringstream & s, const std::string & fn, const std::vector<CompletionCommand> & model) {
    s << "# What the value of an option (\"CMD|--opt\") or a positional (\"CMD|#N\") completes to.\n"
      << fn << "_value() {\n    case \"$1\" in\n";
    for (const CompletionCommand & c : model) {
        for (const CompletionOption & o : c.options) {
            if (!o.takes_value) continue;
            for (const std::string & n : o.names) {
                s << "        " << sq(c.path + "|" + n) << ") echo " << sq(o.value) << ";;\n";
            }
        }
        for (std::size_t i = 0; i < c.positionals.size(); ++i) {
            s << "        " << sq(c.path + "|#" + std::to_string(i + 1)) << ") echo " << sq(c.positionals[i]) << ";;\n";
        }
        if (c.last_repeats && !c.positionals.empty()) {
            s << "        " << sq(c.path + "|#") << "*) echo " << sq(c.positionals.back()) << ";;\n";
        }
    }
    s << "        *) echo none;;\n    esac\n}\n\n";
}

// What differs between the two shells' scripts; the rest of their text is one.
struct ShellText {
    const char * first_word;   // index of the first word after the program's
    const char * words;        // the typed words
    const char * cword;        // the index of the word under the cursor
    const char * locals;       // declarations at the top of the function
    const char * count_pos;    // one more positional
    const char * vopt_test;    // `w` is an option taking a value (after the `-*` test)
    const char * sub_test;     // lines: `w` names a subcommand of `cmd` (at npos 0)
    const char * offer_opts;   // lines: offer _opts for `cur`
    const char * subs_test;    // subcommands may come here (npos 0) and `cmd` has some
    const char * offer_subs;   // line: offer _subs
    const char * kinds;        // lines: the `case "$what"` branches (FN: the function prefix)
    const char * table_note;   // the command table's comment line
    const char * other_row;    // the table's row for any other command
    // The table's words (a subcommand or option with its description, an
    // option taking a value) and how a row's list of them is written.
    std::string (*item)(const std::string & name, const std::string & desc);
    std::string (*vopt)(const std::string & name);
    std::string (*list)(const std::vector<std::string> & items);
};

std::string replace_fn(std::string text, const std::string & fn) {
    for (std::size_t at = text.find("FN"); at != std::string::npos; at = text.find("FN", at + fn.size())) {
        text.replace(at, 2, fn);
    }
    return text;
}

// The command table (command path -> subcommands, options, options taking a
// value), the value table, then the function that walks the typed words.
void tables_and_walker(std::ostringstream & s, const std::vector<CompletionCommand> & model, const std::string & fn,
                       const std::string & prog, const std::string & fn_name, const ShellText & t) {
    s << fn << "_sessions() {\n    \"$1\" swarm ls --ids 2>/dev/null\n}\n\n"
      << t.table_note << "\n" << fn << "_table() {\n    case \"$1\" in\n";
    for (const CompletionCommand & c : model) {
        std::vector<std::string> subs, opts, vopts;
        for (const auto & [name, d] : c.subcommands) subs.push_back(t.item(name, d));
        for (const CompletionOption & o : c.options) {
            for (const std::string & n : o.names) {
                opts.push_back(t.item(n, o.description));
                if (o.takes_value) vopts.push_back(t.vopt(n));
            }
        }
        s << "        " << sq(c.path) << ") _subs=" << t.list(subs) << "; _opts=" << t.list(opts)
          << "; _vopts=" << t.list(vopts) << ";;\n";
    }
    s << "        *) " << t.other_row << ";;\n    esac\n}\n\n";
    value_table(s, fn, model);
    s << fn_name << "() {\n"
      << replace_fn(t.locals, sq(prog))
      << "    for ((i = " << t.first_word << "; i < " << t.cword << "; i++)); do\n"
      << "        w=\"${" << t.words << "[i]}\"\n"
      << "        if [[ -n \"$vopt\" ]]; then vopt=''; continue; fi\n"
      << "        if ((dashdash)); then " << t.count_pos << "; continue; fi\n"
      << "        if [[ \"$w\" == -- ]]; then dashdash=1; continue; fi\n"
      << "        " << fn << "_table \"$cmd\"\n"
      << "        if [[ \"$w\" == -* ]]; then\n"
      << "            if [[ \"$w\" != *=* " << t.vopt_test << "; then vopt=\"$w\"; fi\n"
      << "            continue\n"
      << "        fi\n"
      << t.sub_test
      << "        " << t.count_pos << "\n"
      << "    done\n"
      << "    " << fn << "_table \"$cmd\"\n"
      << "    if [[ -n \"$vopt\" ]]; then\n"
      << "        what=$(" << fn << "_value \"$cmd|$vopt\")\n"
      << "    elif ((!dashdash)) && [[ \"$cur\" == -* ]]; then\n"
      << t.offer_opts
      << "    else\n"
      << "        what=$(" << fn << "_value \"$cmd|#$((npos + 1))\")\n"
      << "        if ((npos == 0 && !dashdash" << t.subs_test << "; then\n"
      << "            " << t.offer_subs << "\n"
      << "        fi\n"
      << "    fi\n"
      << "    case \"$what\" in\n"
      << replace_fn(t.kinds, fn)
      << "    esac\n";
}

std::string bash_script(const std::vector<CompletionCommand> & model, const std::string & prog) {
    const std::string  fn = "_" + ident(prog);
    const ShellText    t{
        "1", "COMP_WORDS", "COMP_CWORD",
        "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=FN w vopt='' i npos=0 dashdash=0 what\n"
           "    local _subs _opts _vopts\n"
           "    COMPREPLY=()\n",
        "npos=$((npos + 1))", "&& \" $_vopts \" == *\" $w \"* ]]",
        "        if ((npos == 0)) && [[ \" $_subs \" == *\" $w \"* ]]; then cmd=\"$cmd $w\"; continue; fi\n",
        "        COMPREPLY=($(compgen -W \"$_opts\" -- \"$cur\"))\n"
           "        return 0\n",
        ")) && [[ -n \"$_subs\" ]]", "COMPREPLY=($(compgen -W \"$_subs\" -- \"$cur\"))",
        "        session) COMPREPLY+=($(compgen -W \"$(FN_sessions \"${COMP_WORDS[0]}\")\" -- \"$cur\"));;\n"
           "        choices\\ *) COMPREPLY+=($(compgen -W \"${what#choices }\" -- \"$cur\"));;\n"
           "        files) COMPREPLY+=($(compgen -f -- \"$cur\")); compopt -o filenames 2>/dev/null;;\n",
        "# Subcommands, options and options taking a value of command \"$1\".",
        "_subs=''; _opts=''; _vopts=''",
        [](const std::string & n, const std::string &) { return n; },
        [](const std::string & n) { return n; },
        [](const std::vector<std::string> & items) {
            std::string words;
            for (const std::string & w : items) words += (words.empty() ? "" : " ") + w;
            return sq(words);
        }};
    std::ostringstream s;
    s << "# bash completion for " << prog << ", generated by `" << prog
      << " swarm completion bash` from its command table.\n"
      << "# Load it with `source <(" << prog << " swarm completion bash)`, or install it:\n"
      << "#   " << prog << " swarm completion bash > ~/.local/share/bash-completion/completions/" << prog << "\n\n";
    tables_and_walker(s, model, fn, prog, fn + "_complete", t);
    s << "    return 0\n"
      << "}\n\n"
      << "complete -F " << fn << "_complete " << prog << "\n";
    return s.str();
}

std::string zsh_script(const std::vector<CompletionCommand> & model, const std::string & prog) {
    const std::string fn = "_" + ident(prog);
    const ShellText   t{
        "2", "words", "CURRENT",
        "    local cmd=FN w vopt='' cur=\"${words[CURRENT]}\" what\n"
           "    local -i i npos=0 dashdash=0\n"
           "    local -a _subs _opts _vopts names ids choices\n",
        "npos+=1", "]] && ((${_vopts[(Ie)$w]}))",
        "        names=(${_subs%%:*})\n"
           "        if ((npos == 0 && ${names[(Ie)$w]})); then cmd=\"$cmd $w\"; continue; fi\n",
        "        _describe -t options 'option' _opts\n"
           "        return\n",
        " && ${#_subs}))", "_describe -t commands 'command' _subs",
        "        session) ids=(${(f)\"$(FN_sessions \"${words[1]}\")\"}); compadd -a ids;;\n"
           "        choices\\ *) choices=(${=${what#choices }}); compadd -a choices;;\n"
           "        files) _files;;\n",
        "# Subcommands and options (name:description) and options taking a value of command \"$1\".",
        "_subs=(); _opts=(); _vopts=()",
        zsh_item,
        sq,
        [](const std::vector<std::string> & items) {
            std::string words = "(";
            for (const std::string & w : items) words += " " + w;
            return words + " )";
        }};
    std::ostringstream s;
    s << "#compdef " << prog << "\n"
      << "# zsh completion for " << prog << ", generated by `" << prog
      << " swarm completion zsh` from its command table.\n"
      << "# Load it with `source <(" << prog << " swarm completion zsh)`, or install it as " << fn
      << " in a directory of $fpath.\n\n";
    tables_and_walker(s, model, fn, prog, fn, t);
    s << "}\n\n"
      << "if [[ \"${funcstack[1]}\" == " << fn << " ]]; then\n"
      << "    " << fn << " \"$@\"\n"
      << "else\n"
      << "    compdef " << fn << " " << prog << "\n"
      << "fi\n";
    return s.str();
}

} // namespace

std::vector<CompletionCommand> completion_model(const CLI::App & root, const std::string & prog) {
    std::vector<CompletionCommand> out;
    walk(root, prog, out);
    return out;
}

std::string completion_script(const CLI::App & root, const std::string & prog, Shell shell) {
    std::vector<CompletionCommand> model = completion_model(root, prog);
    return shell == Shell::bash ? bash_script(model, prog) : zsh_script(model, prog);
}

} // namespace standin::swarm
