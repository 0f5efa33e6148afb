// ddplaunch: parse → run → exit code.
#include <iostream>

#include "launcher/agent.hpp"
#include "launcher/cli.hpp"
#include "rendezvous/exit_codes.hpp"

int main(int argc, char** argv) {
  using namespace ddp::launcher;
  try {
    const ParsedCommandLine parsed = parse_command_line(argc, argv, process_env());
    if (parsed.early_exit_text) {
      std::cout << *parsed.early_exit_text;
      return ddp::kExitOk;
    }
    if (parsed.config.dry_run) return print_dry_run(parsed.config);
    return run_agent(parsed.config);
  } catch (const UsageError& e) {
    std::cerr << "ddplaunch: " << e.what() << "\n";
    return ddp::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "ddplaunch: " << e.what() << "\n";
    return ddp::kExitFailure;
  }
}
