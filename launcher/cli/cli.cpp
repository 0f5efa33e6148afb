// Command-line parsing, in five steps (only the flags the command line mentions are declared,
// mentioned_flags.hpp): abbreviated flags are written out (flag_prefixes.cpp),
// CLI11 reads the flags (cli_options.cpp; an empty value is refused by the flag's name,
// empty_values.cpp), PET_* variables fill in the ones not given (pet_defaults.cpp), the text
// becomes a LaunchConfig (command_line_config.cpp, torchrun_env.cpp), and validate() checks it
// (validate.cpp).
#include "launcher/cli/cli.hpp"

#include <CLI/CLI.hpp>

#include "launcher/cli/cli_options.hpp"
#include "launcher/cli/command_line_config.hpp"
#include "launcher/cli/completion.hpp"
#include "launcher/cli/empty_values.hpp"
#include "launcher/cli/fleet_flags.hpp"
#include "launcher/cli/flag_app.hpp"
#include "launcher/cli/flag_prefixes.hpp"
#include "launcher/cli/help_formatter.hpp"
#include "launcher/cli/mentioned_flags.hpp"
#include "launcher/cli/pet_defaults.hpp"
#include "launcher/cli/validate.hpp"

namespace ddp::launcher {
namespace {

// What CLI11 left unparsed is the program and its arguments, after an optional "--".
void take_program(std::vector<std::string> rest, LaunchConfig& c) {
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (rest.empty()) return;  // validate() names the missing program
  if (rest.front().size() > 1 && rest.front()[0] == '-') {
    throw UsageError("unknown option " + rest.front() + "; see ddplaunch --help (options go before the program)");
  }
  c.program = rest.front();
  c.program_args.assign(rest.begin() + 1, rest.end());
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, const char* const* argv, const EnvLookup& env,
                                     const std::vector<BackendKind>& backends, const NvidiaDriverProbe& nvidia_driver) {
  ParsedCommandLine out;
  FlagApp app{"ddplaunch: start distributed data-parallel workers on this node (a drop-in for torchrun)"};
  const std::vector<std::string> given_args(argv, argv + argc);
  if (const MentionedFlags mentioned(given_args, env); !mentioned.all()) {
    app.declare_only([mentioned](const std::string& names) { return mentioned(names); });
  }
  app.prefix_command();  // everything from the first positional argument on belongs to the program
  app.formatter(std::make_shared<HelpFormatter>());
  CommandLineValues values;
  PetDefaults pet;
  declare_options(app, values, pet);
  declare_fleet_options(app, values.config.fleet);
  // `--flag=` is an empty value, as in argparse, not the flag alone (CLI11 would take the program
  // as its value); an empty value is refused by the flag's name, unless empty means something.
  // argparse's abbreviations (--nnode) are written out first, so every later step sees full names.
  const std::vector<std::string> expanded = expand_flag_prefixes(app, given_args);
  std::vector<const char*> expanded_argv;
  for (const std::string& arg : expanded) expanded_argv.push_back(arg.c_str());
  const std::vector<std::string> args =
      check_empty_values(app, static_cast<int>(expanded_argv.size()), expanded_argv.data());
  std::vector<const char*> args_argv;
  for (const std::string& arg : args) args_argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(args_argv.size()), args_argv.data());
  } catch (const CLI::CallForHelp&) {
    out.early_exit_text = app.help();
    return out;
  } catch (const CLI::CallForVersion& version) {
    out.early_exit_text = std::string(version.what()) + "\n";
    return out;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + "; see ddplaunch --help");
  }
  if (!values.print_completion.empty()) {
    out.early_exit_text = completion_script(app, values.print_completion);
    return out;
  }
  pet.apply(env);
  const std::vector<std::string> rest = app.remaining();
  take_program(rest, values.config);
  if (values.config.fleet.active()) fill_forward_args(app, args, args.size() - rest.size(), values.config.fleet);
  values.config.find_job = (values.config.dump_stacks || values.config.status) && app.given("--master_addr") == 0 &&
                           app.given("--master_port") == 0 && app.given("--rdzv_id") == 0 &&
                           app.given("--rdzv_endpoint") == 0;
  out.config = to_launch_config(std::move(values), env, backends, nvidia_driver);
  validate(out.config);
  return out;
}

}  // namespace ddp::launcher
