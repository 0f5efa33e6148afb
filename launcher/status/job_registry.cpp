// See job_registry.hpp.
#include "launcher/status/job_registry.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"

namespace ddp::launcher {
namespace {

// A record is a few hundred bytes; anything much larger is not one of ours.
constexpr std::size_t kMaxRecordBytes = 64 * 1024;

std::string parent_of(const std::string& dir) {
  return std::filesystem::path(dir).parent_path().string();
}

// Checks one level of the registry's directory (job_registry.hpp). Returns false when it does
// not exist; throws RegistryError when it is not a private directory of this user.
bool check_level(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    throw RegistryError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) throw RegistryError(path + " is not a directory");
  if (st.st_uid != ::geteuid()) {
    throw RegistryError(fmt::format("{} belongs to uid {}, not to this user (uid {})", path, st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & 022) != 0) {
    throw RegistryError(
        fmt::format("{} may be written by other users (mode {:o}); make it 0700", path, st.st_mode & 07777));
  }
  return true;
}

void make_level(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    throw RegistryError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  }
  check_level(path);
}

std::optional<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxRecordBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxRecordBytes) return std::nullopt;
  return text;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

JobRegistry JobRegistry::for_user(const EnvLookup& env) {
  const uid_t uid = ::geteuid();
  if (const auto xdg = env("XDG_RUNTIME_DIR"); xdg && !xdg->empty() && xdg->front() == '/') {
    // Not another user's (sudo keeps the caller's XDG_RUNTIME_DIR), and writable.
    struct stat st {};
    if (::stat(xdg->c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid && ::access(xdg->c_str(), W_OK) == 0)
      return JobRegistry(*xdg + "/ddplaunch/jobs");
  }
  return fallback();
}

JobRegistry JobRegistry::fallback() {
  return JobRegistry(fmt::format("/tmp/ddplaunch-{}/jobs", ::geteuid()));
}

std::vector<JobRegistry> JobRegistry::every_for_user(const EnvLookup& env) {
  std::vector<JobRegistry> all{for_user(env)};
  // A session's runtime directory is checked as XDG_RUNTIME_DIR is (for_user); the fallback is not
  // checked here: running() refuses it if it is not this user's.
  const std::string session = fmt::format("/run/user/{}", ::geteuid());
  for (JobRegistry r : {for_user(map_env({{"XDG_RUNTIME_DIR", session}})), fallback()}) {
    const bool known = std::any_of(all.begin(), all.end(), [&r](const JobRegistry& a) { return a.dir() == r.dir(); });
    if (!known) all.push_back(std::move(r));
  }
  return all;
}

void JobRegistry::prepare() const {
  make_level(parent_of(dir_));
  make_level(dir_);
}

std::string JobRegistry::add(const JobRecord& record) const {
  const std::string path = fmt::format("{}/{}.json", dir_, record.pid);
  const std::string temporary = fmt::format("{}/.{}.json.tmp", dir_, record.pid);
  const std::string text = record.to_json();
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw RegistryError(fmt::format("cannot write {}: {}", temporary, std::strerror(errno)));
  const ssize_t written = ::write(fd, text.data(), text.size());
  const int write_errno = errno;
  ::close(fd);
  // rename() makes the whole record appear at once.
  if (written != static_cast<ssize_t>(text.size()) || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = written != static_cast<ssize_t>(text.size()) ? (written < 0 ? write_errno : ENOSPC) : errno;
    ::unlink(temporary.c_str());  // best effort: a leftover temporary file is never read as a record
    throw RegistryError(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  return path;
}

std::vector<JobRecord> JobRegistry::running() const {
  std::vector<JobRecord> live;
  if (!check_level(parent_of(dir_)) || !check_level(dir_)) return live;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) throw RegistryError(fmt::format("cannot read {}: {}", dir_, std::strerror(errno)));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.front() != '.' && ends_with(name, ".json")) names.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : names) {
    const std::string path = dir_ + "/" + name;
    const auto text = read_small_file(path);
    if (!text) continue;  // removed meanwhile by its launcher or another reader
    const auto record = JobRecord::from_json(*text);
    if (!record) continue;  // not a record of ours: left alone
    if (process_start_ticks(record->pid) != record->proc_start) {
      // Stale: its launcher was killed. Another reader may remove it first (ENOENT), which is as good.
      ::unlink(path.c_str());
      continue;
    }
    live.push_back(*record);
  }
  return live;
}

std::vector<JobRecord> running_jobs(const std::vector<JobRegistry>& registries, std::vector<std::string>& refused) {
  std::vector<JobRecord> live;
  for (const JobRegistry& registry : registries) {
    try {
      for (JobRecord& r : registry.running()) {
        const bool seen = std::any_of(live.begin(), live.end(), [&r](const JobRecord& l) {
          return l.pid == r.pid && l.proc_start == r.proc_start;
        });
        if (!seen) live.push_back(std::move(r));
      }
    } catch (const RegistryError& e) {
      refused.emplace_back(e.what());
    }
  }
  return live;
}

std::string describe_dirs(const std::vector<JobRegistry>& registries) {
  std::string text;
  for (std::size_t i = 0; i < registries.size(); ++i) {
    if (i > 0) text += i + 1 == registries.size() ? " and " : ", ";
    text += registries[i].dir();
  }
  return text;
}

std::optional<unsigned long long> process_start_ticks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (pid <= 0 || !std::getline(in, line)) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields count from the
  // last ')'; the first after it is field 3, the start time field 22.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (const std::exception&) {
    return std::nullopt;  // not a number: not the /proc we know
  }
}

JobRegistration::JobRegistration(boost::asio::io_context& io, JobRecord record)
    : timer_(io), record_(std::move(record)) {
  if (record_.hosts_store) {
    log::info("job store on {} (ddplaunch --dump_stacks finds this job)",
              rendezvous::format_endpoint(record_.master_addr, static_cast<std::uint16_t>(record_.port)));
  }
  timer_.expires_after(kRegisterAfter);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) write();  // aborted: `this` may be gone
  });
}

JobRegistration::~JobRegistration() {
  timer_.cancel();
  for (const std::string& path : paths_) {
    ::unlink(path.c_str());  // a record already gone (removed by hand) is what we want anyway
  }
}

void JobRegistration::write() {
  std::error_code ignored;  // a removed working directory is recorded as ""
  record_.cwd = std::filesystem::current_path(ignored).string();
  record_.proc_start = process_start_ticks(record_.pid).value_or(0);
  std::string refused;  // the first place that refused the record, and why
  std::string written;  // where it went
  std::vector<JobRegistry> places{JobRegistry::for_user(process_env())};
  if (places.front().dir() != JobRegistry::fallback().dir()) places.push_back(JobRegistry::fallback());
  for (const JobRegistry& registry : places) {
    try {
      registry.prepare();
      paths_.push_back(registry.add(record_));
      written += (written.empty() ? "" : " and ") + registry.dir();
    } catch (const RegistryError& e) {
      if (refused.empty()) refused = e.what();
    }
  }
  if (refused.empty()) return;
  if (paths_.empty()) {
    log::warning("job registry: {}; this job is not registered, ddplaunch --dump_stacks {} reaches it", refused,
                 selecting_flags(record_));
  } else {
    log::warning("job registry: {}; this job is registered in {} only", refused, written);
  }
}

std::unique_ptr<JobRegistration> register_job(boost::asio::io_context& io, const LaunchConfig& c,
                                              const EffectiveConfig& eff, int group_rank, int nnodes,
                                              bool hosts_store) {
  if (!c.rdzv_rules.node0_hosts_store) return nullptr;  // no store of the job on node 0 to record
  JobRecord r;
  r.pid = static_cast<int>(::getpid());
  r.started_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  r.run_id = c.run_id;
  r.master_addr = c.master_addr;
  r.port = eff.port;  // the store's real port (set_up_node: --master_port on the other nodes)
  r.nnodes = nnodes;
  r.node_rank = group_rank;
  r.hosts_store = hosts_store;
  r.secret = !c.rdzv_secret.empty();
  r.command = short_command(c.program, c.program_args);
  r.status_socket = eff.status_socket;
  return std::make_unique<JobRegistration>(io, std::move(r));
}

}  // namespace ddp::launcher
