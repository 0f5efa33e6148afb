// Spawning and output forwarding; see worker_process.hpp.
#include "launcher/worker_process.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <boost/asio/read.hpp>
#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/io.hpp>

namespace ddp::launcher {

namespace bp = boost::process;

WorkerProcess::WorkerProcess(boost::asio::io_context& io, const WorkerSpec& spec, OutputOptions output)
    : spec_(spec), output_(std::move(output)) {
  DDP_ASSERT(output_.console != nullptr, "worker output needs a console writer");
  const std::string exe = resolve_program(spec.argv.front());
  out_.pipe = std::make_unique<bp::async_pipe>(io);
  err_.pipe = std::make_unique<bp::async_pipe>(io);
  out_.console = output_.to_console_out;
  err_.console = output_.to_console_err;
  err_.is_err = true;
  if (!spec.log_dir.empty()) std::filesystem::create_directories(spec.log_dir);
  if (!output_.stdout_file.empty()) out_.file.open(output_.stdout_file, std::ios::trunc);
  if (!output_.stderr_file.empty()) err_.file.open(output_.stderr_file, std::ios::trunc);

  // The child's environment as execve wants it, built here before the fork. (Boost 1.74's
  // bp::environment reads past the end of its strings in find(), which ASan reports.)
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  const pid_t parent = ::getpid();
  try {
    bp::child child(
        bp::exe = exe, bp::args = args, bp::std_out > *out_.pipe, bp::std_err > *err_.pipe,
        bp::extend::on_exec_setup = [parent, &envp](auto& exec) {
          exec.env = envp.data();
          // Between fork and exec: own process group (signals reach the whole
          // tree), and death with the launcher. If the launcher already died
          // before prctl took effect, give up now instead of running orphaned.
          ::setpgid(0, 0);
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (::getppid() != parent) ::_exit(127);
        });
    pid_ = child.id();
    // The event loop reaps workers itself (SIGCHLD + waitpid), so the handle lets go.
    child.detach();
  } catch (const bp::process_error& e) {
    throw UsageError("cannot start '" + spec.argv.front() + "': " + e.code().message() +
                     "; check that it is an executable program");
  }
  read(out_);
  read(err_);
}

void WorkerProcess::signal(int signo) const {
  if (exited_ || pid_ <= 0) return;
  if (::kill(-pid_, signo) != 0 && errno == ESRCH) {
    // The group is gone already (the worker exited but is not reaped yet): nothing to signal.
    ::kill(pid_, signo);
  }
}

void WorkerProcess::set_exited(int status) {
  exited_ = true;
  if (WIFEXITED(status)) code_ = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) term_signal_ = WTERMSIG(status);
}

int WorkerProcess::exit_code() const {
  return term_signal_ ? 128 + term_signal_ : code_;
}

void WorkerProcess::read(Stream& s) {
  s.pipe->async_read_some(
      boost::asio::buffer(s.buffer), [this, &s](const boost::system::error_code& ec, std::size_t n) {
        if (n > 0) {
          s.partial.append(s.buffer.data(), n);
          std::size_t start = 0;
          for (auto nl = s.partial.find('\n'); nl != std::string::npos; nl = s.partial.find('\n', start)) {
            emit(s, s.partial.substr(start, nl - start));
            start = nl + 1;
          }
          s.partial.erase(0, start);
        }
        if (ec) {
          if (!s.partial.empty()) emit(s, s.partial);
          s.partial.clear();
          close_stream(s);
          return;
        }
        read(s);
      });
}

void WorkerProcess::emit(Stream& s, const std::string& line) {
  if (s.file.is_open()) s.file << line << '\n';
  if (s.is_err) {
    tail_.push_back(line);
    if (tail_.size() > output_.tail_lines) tail_.pop_front();
  }
  if (!s.console) return;
  output_.console->write(s.is_err ? 2 : 1, output_.prefix + line + "\n");
}

void WorkerProcess::close_stream(Stream& s) {
  boost::system::error_code ignored;  // closing a pipe at EOF cannot fail meaningfully
  s.pipe->close(ignored);
  if (s.file.is_open()) s.file.close();
  if (--open_pipes_ == 0 && output_done_cb_) output_done_cb_();
}

}  // namespace ddp::launcher
