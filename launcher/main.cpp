// ddplaunch: parse → run → exit code.
#include <iostream>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/agent.hpp"
#include "launcher/cli.hpp"

int main(int argc, char** argv) {
  using namespace ddp::launcher;
  namespace log = ddp::log;
  try {
    log::set_level_from_env();
    const ParsedCommandLine parsed = parse_command_line(argc, argv, ddp::process_env());
    if (parsed.early_exit_text) {
      std::cout << *parsed.early_exit_text;
      return ddp::kExitOk;
    }
    if (!parsed.config.log_level.empty()) log::set_level(log::parse_level(parsed.config.log_level));
    if (parsed.config.dry_run) return print_dry_run(parsed.config);
    return run_agent(parsed.config);
  } catch (const UsageError& e) {
    log::error("{}", e.what());
    return ddp::kExitUsage;
  } catch (const std::exception& e) {
    log::error("{}", e.what());
    return ddp::kExitFailure;
  }
}
