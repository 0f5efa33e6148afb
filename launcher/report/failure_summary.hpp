// The failure summary printed on stderr when a worker fails: torchrun's layout plus the
// worker's last stderr lines, so the real error is on screen without `@record`. A Python worker
// whose stderr names a ModuleNotFoundError gets a hint naming the interpreter that ran it.
#pragma once

#include <chrono>
#include <string>

#include "launcher/workers/process_context.hpp"
#include "launcher/config/python_interpreter.hpp"

namespace ddp::launcher {

struct FailureContext {
  std::string program;
  std::string host;
  int node_rank = 0;
  PythonInterpreter python;                      // the workers' interpreter; path "" when the program is not Python
  std::string death_note;                        // why the signal came, when known (oom_check.hpp); "" otherwise
  std::chrono::system_clock::time_point time{};  // when it failed (the epoch: now)
  std::string heading;                           // a line under the title ("" = none)
  std::string appendix;  // more sections inside the frame, after the worker's (round_report.hpp)
};

// Local time as torchrun prints it: 2026-11-25_06:30:00. Pure.
std::string time_text(std::chrono::system_clock::time_point time);

// Pure apart from reading the worker's error file, if it wrote one.
std::string describe_failure(const WorkerResult& worker, const FailureContext& context);

}  // namespace ddp::launcher
