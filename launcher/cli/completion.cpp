// See completion.hpp.
#include "launcher/cli/completion.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {
namespace {

// Every spelling of every flag, `--long` and `-s`, space-separated; `dashes` false drops the
// leading dashes of long names (tcsh's `c/--/` pattern takes them off).
std::string flag_words(const CLI::App& app, bool dashes) {
  std::string words;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) words += (dashes ? " --" : " ") + name;
    if (dashes) {
      for (const std::string& name : option->get_snames()) words += " -" + name;
    }
  }
  return words.empty() ? words : words.substr(1);
}

}  // namespace

std::string completion_script(const CLI::App& app, const std::string& shell) {
  if (shell == "bash") {
    return fmt::format(
        "# bash completion for ddplaunch: eval \"$(ddplaunch --print_completion bash)\"\n"
        "_ddplaunch() {{\n"
        "  local cur=\"${{COMP_WORDS[COMP_CWORD]}}\"\n"
        "  if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); fi\n"
        "}}\n"
        "complete -o default -F _ddplaunch ddplaunch\n",
        flag_words(app, true));
  }
  if (shell == "zsh") {
    return fmt::format(
        "#compdef ddplaunch\n"
        "# zsh completion for ddplaunch (after compinit): source <(ddplaunch --print_completion zsh)\n"
        "_ddplaunch() {{\n"
        "  if [[ $PREFIX == -* ]]; then compadd -- {}; else _files; fi\n"
        "}}\n"
        "compdef _ddplaunch ddplaunch\n",
        flag_words(app, true));
  }
  DDP_ASSERT(shell == "tcsh", "completion for an unknown shell: " + shell);
  return fmt::format(
      "# tcsh completion for ddplaunch: eval `ddplaunch --print_completion tcsh`\n"
      "complete ddplaunch 'c/--/({})/' 'p/*/f/'\n",
      flag_words(app, false));
}

}  // namespace ddp::launcher
