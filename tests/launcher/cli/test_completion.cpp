// --print_completion (launcher/cli/completion.hpp): every spelling of every declared flag in the
// bash, zsh and tcsh scripts, and the bash script run by bash completing a prefix.
#include "launcher/cli/completion.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/launcher/cli/few_flags.hpp"
#include "tests/support/temp_dir.hpp"

using Catch::Matchers::Contains;
using ddp::launcher::completion_script;

namespace {

// What bash completes for the word `word` after sourcing `script`.
std::string bash_completes(const std::string& script, const std::string& word) {
  ddp::testing::TempDir dir("completion");
  const std::string file = (dir.path / "complete.sh").string();
  std::ofstream(file) << script << "COMP_WORDS=(ddplaunch " << word << "); COMP_CWORD=1; _ddplaunch\n"
                      << "echo \"${COMPREPLY[*]}\"\n";
  FILE* out = ::popen(("bash " + file).c_str(), "r");
  REQUIRE(out != nullptr);
  std::string text;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, out) != nullptr) text += buffer;
  CHECK(::pclose(out) == 0);
  return text;
}

}  // namespace

TEST_CASE("completion: the scripts list every spelling of every flag", "[cli]") {
  ddp::testing::FewFlags f;
  f.app.add_flag("-v,--verbose", f.on);
  const std::string bash = completion_script(f.app, "bash");
  CHECK_THAT(bash, Contains("--nproc_per_node --nproc-per-node --nnodes") && Contains("--verbose -v"));
  CHECK_THAT(bash, Contains("complete -o default -F _ddplaunch ddplaunch"));
  const std::string zsh = completion_script(f.app, "zsh");
  CHECK_THAT(zsh, Contains("#compdef ddplaunch") && Contains("compadd -- --help -h --nproc_per_node --nproc-per-node"));
  // tcsh completes after its `--` pattern: the long names without their dashes, no short ones
  // (CLI11's own --help comes first).
  const std::string tcsh = completion_script(f.app, "tcsh");
  CHECK_THAT(tcsh, Contains("'c/--/(help nproc_per_node nproc-per-node nnodes") && Contains(" verbose)/' 'p/*/f/'"));
}

TEST_CASE("completion: bash completes a flag's prefix from the script", "[cli]") {
  ddp::testing::FewFlags f;
  const std::string script = completion_script(f.app, "bash");
  CHECK(bash_completes(script, "--nn") == "--nnodes\n");
  CHECK(bash_completes(script, "--rdzv_") == "--rdzv_backend --rdzv_conf\n");
  CHECK(bash_completes(script, "train") == "\n");  // not a flag: file names, from bash's default
}
