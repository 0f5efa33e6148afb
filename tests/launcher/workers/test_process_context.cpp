// The POSIX process context (workers/process_context.hpp) as the agent uses it across rounds: a
// past round's context freed from inside another context's exit callback, while a SIGCHLD has
// queued the freed context's own handler too (every signal set of SIGCHLD hears each signal).
#include "launcher/workers/process_context.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "launcher/workers/console_writer.hpp"

using namespace ddp::launcher;

TEST_CASE("a context freed while its SIGCHLD handler is queued does not run it") {
  boost::asio::io_context io;
  ConsoleWriter console;
  const OutputPolicy policy{&console, nullptr};
  // The newer context's handler runs first (asio hears a signal's newest set first): it reports
  // its worker's exit, whose callback frees the older context, whose handler is still queued.
  // Before the fix, that handler ran on the freed context (ASan: heap-use-after-free).
  for (int round = 0; round < 20; ++round) {
    auto past = make_posix_process_context(io, policy);
    auto current = make_posix_process_context(io, policy);
    WorkerSpec spec;
    spec.argv = {"/bin/true"};
    spec.output.to_console_out = false;
    spec.output.to_console_err = false;
    bool reported = false;
    current->start({spec}, [&](const WorkerResult& r) {
      CHECK(r.exit_code == 0);
      past.reset();
      reported = true;
    });
    io.restart();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(reported && current->settled()) && std::chrono::steady_clock::now() < end)
      io.run_for(std::chrono::milliseconds(50));
    REQUIRE(reported);
    CHECK(past == nullptr);
    current.reset();
    io.poll();  // whatever is left queued for the freed contexts runs now, and must touch nothing
  }
}
