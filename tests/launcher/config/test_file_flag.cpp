// The rule for flags that name files (file_flag.hpp): which flags name one, what each may find
// there (pure), the check made at the start on the file system (a FIFO, /dev/zero, a directory
// where a file is expected, a missing or unwritable directory), and the non-blocking open of
// what the launcher keeps open (a FIFO is refused at once, with or without a peer).
#include "launcher/config/file_flag.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/usage_error_of.hpp"

namespace {

using ddp::launcher::check_file_flag;
using ddp::launcher::FileFlag;
using ddp::launcher::FileUse;
using ddp::launcher::FoundFile;

std::string error_of(const FileFlag& f) {
  return ddp::testing::usage_error_of([&] { check_file_flag(f); });
}

std::string summary_error(const std::string& path) {
  return error_of(FileFlag{"--summary_json", path, FileUse::Write});
}

// A scratch directory, removed at the end of the test.
struct Scratch {
  std::string dir = "/tmp/ddplaunch-test-file-flag-" + std::to_string(::getpid());
  Scratch() { std::filesystem::create_directories(dir); }
  ~Scratch() { std::filesystem::remove_all(dir); }
};

}  // namespace

TEST_CASE("every flag that names a file is listed with what it is for", "[config]") {
  ddp::launcher::LaunchConfig c;
  CHECK(ddp::launcher::file_flags(c).empty());
  c.log_dir = "/l";
  c.progress_file = "/p";
  c.event_log = "/e";
  c.summary_json = "/s";
  c.etcd_ca_file = "/ca";
  c.etcd_cert_file = "/cert";
  c.etcd_key_file = "/key";
  std::vector<std::string> listed;
  for (const FileFlag& f : ddp::launcher::file_flags(c)) listed.push_back(f.flag + "=" + f.path);
  CHECK(listed == std::vector<std::string>{"--log_dir=/l", "--progress_file=/p", "--event_log=/e", "--summary_json=/s",
                                           "--rdzv_conf cacert=/ca", "--rdzv_conf cert=/cert", "--rdzv_conf key=/key"});
}

TEST_CASE("the rule: a regular file, a directory for --log_dir, /dev/null and own streams only for outputs",
          "[config]") {
  using ddp::launcher::file_refusal;
  const FoundFile regular{0, S_IFREG | 0644};
  const FoundFile fifo{0, S_IFIFO | 0644};
  const FoundFile dir{0, S_IFDIR | 0755};
  const FoundFile zero{0, S_IFCHR | 0666};
  const FoundFile null{0, S_IFCHR | 0666, true};
  const FoundFile stderr_pipe{0, S_IFIFO | 0600, false, true};
  const FoundFile missing{ENOENT};
  const FileFlag out{"--event_log", "/x", FileUse::Write};
  const FileFlag progress{"--progress_file", "/x", FileUse::ReadLater};
  const FileFlag secret{"--rdzv_conf token_file", "/x", FileUse::Read, "the job secret"};
  const FileFlag logs{"--log_dir", "/x", FileUse::Directory};

  CHECK(file_refusal(out, regular).empty());
  CHECK(file_refusal(out, null).empty());
  CHECK(file_refusal(out, stderr_pipe).empty());
  CHECK(file_refusal(out, missing).empty());
  CHECK(file_refusal(out, fifo) ==
        "--event_log=/x is a FIFO, not a regular file; give a regular file path (it is created if missing), or "
        "/dev/null");
  CHECK(file_refusal(out, zero) ==
        "--event_log=/x is a character device, not a regular file; give a regular file path (it is created if "
        "missing), or /dev/null");
  CHECK_THAT(file_refusal(out, dir), Catch::StartsWith("--event_log=/x is a directory, not a regular file"));

  CHECK(file_refusal(progress, regular).empty());
  CHECK(file_refusal(progress, missing).empty());  // the training writes it later
  CHECK_THAT(file_refusal(progress, null), Catch::StartsWith("--progress_file=/x is a character device"));
  CHECK_THAT(file_refusal(progress, stderr_pipe), Catch::StartsWith("--progress_file=/x is a FIFO"));
  CHECK(file_refusal(progress, dir) ==
        "--progress_file=/x is a directory, not a regular file; give the path of a regular file that the training "
        "writes (it may be missing until then)");

  CHECK(file_refusal(secret, regular).empty());
  CHECK(file_refusal(secret, missing) ==
        "--rdzv_conf token_file=/x cannot be read (No such file or directory); give a regular file holding the job "
        "secret");
  CHECK_THAT(file_refusal(secret, null), Catch::StartsWith("--rdzv_conf token_file=/x is a character device"));

  CHECK(file_refusal(logs, dir).empty());
  CHECK(file_refusal(logs, missing).empty());
  CHECK(file_refusal(logs, zero) ==
        "--log_dir=/x is a character device, not a directory; give a directory path (it is created if missing)");
  CHECK_THAT(file_refusal(logs, regular), Catch::StartsWith("--log_dir=/x is a regular file, not a directory"));
}

TEST_CASE("an output file is checked where it will be written, and nothing is created", "[config]") {
  const Scratch scratch;
  const std::string& dir = scratch.dir;

  SECTION("a writable directory passes, and the file is not made") {
    CHECK(summary_error(dir + "/s.json") == "<no exception>");
    CHECK_FALSE(std::filesystem::exists(dir + "/s.json"));
    std::ofstream(dir + "/old.json") << "{}";
    CHECK(summary_error(dir + "/old.json") == "<no exception>");
    CHECK(summary_error("/dev/null") == "<no exception>");
  }
  SECTION("a missing directory") {
    CHECK(summary_error(dir + "/no/such/s.json") ==
          "--summary_json=" + dir + "/no/such/s.json: directory " + dir +
              "/no/such does not exist; create it or give a file in an existing directory");
  }
  SECTION("a file where the directory should be") {
    std::ofstream(dir + "/plain") << "x";
    CHECK_THAT(summary_error(dir + "/plain/s.json"), Catch::Contains("--summary_json=" + dir + "/plain/s.json") &&
                                                         Catch::Contains("give a file in an existing directory"));
  }
  SECTION("a directory, a FIFO or /dev/zero given as the file") {
    CHECK_THAT(summary_error(dir), Catch::StartsWith("--summary_json=" + dir + " is a directory, not a regular file"));
    REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
    CHECK_THAT(summary_error(dir + "/fifo"), Catch::StartsWith("--summary_json=" + dir + "/fifo is a FIFO"));
    CHECK_THAT(summary_error("/dev/zero"), Catch::StartsWith("--summary_json=/dev/zero is a character device"));
  }
  if (::geteuid() != 0) {  // root writes anyway
    SECTION("a read-only directory or file") {
      std::filesystem::create_directories(dir + "/ro");
      std::ofstream(dir + "/ro.json") << "{}";
      ::chmod((dir + "/ro").c_str(), 0555);
      ::chmod((dir + "/ro.json").c_str(), 0444);
      CHECK_THAT(summary_error(dir + "/ro/s.json"), Catch::Contains("cannot create files in " + dir + "/ro"));
      CHECK_THAT(summary_error(dir + "/ro.json"), Catch::Contains("cannot write it"));
      ::chmod((dir + "/ro").c_str(), 0755);
    }
  }
}

TEST_CASE("inputs and the log directory are checked on the file system without opening them", "[config]") {
  const Scratch scratch;
  const std::string fifo = scratch.dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Each would block for ever if opened for reading: the check only stats them.
  CHECK_THAT(error_of({"--progress_file", fifo, FileUse::ReadLater}),
             Catch::StartsWith("--progress_file=" + fifo + " is a FIFO, not a regular file"));
  CHECK_THAT(error_of({"--rdzv_conf cacert", fifo, FileUse::Read, "the CA certificates (PEM)"}),
             Catch::StartsWith("--rdzv_conf cacert=" + fifo + " is a FIFO"));
  CHECK_THAT(error_of({"--log_dir", fifo, FileUse::Directory}),
             Catch::StartsWith("--log_dir=" + fifo + " is a FIFO, not a directory"));
  CHECK_THAT(error_of({"--progress_file", "/dev/zero", FileUse::ReadLater}),
             Catch::StartsWith("--progress_file=/dev/zero is a character device"));
  CHECK(error_of({"--progress_file", scratch.dir + "/later", FileUse::ReadLater}) == "<no exception>");
  CHECK(error_of({"--log_dir", scratch.dir + "/new", FileUse::Directory}) == "<no exception>");
  CHECK_FALSE(std::filesystem::exists(scratch.dir + "/new"));
  CHECK_THAT(error_of({"--rdzv_conf key", scratch.dir + "/none", FileUse::Read, "the client's private key (PEM)"}),
             Catch::Contains("cannot be read (No such file or directory)"));
}

TEST_CASE("a kept file is opened without blocking and refused on its descriptor", "[config]") {
  const Scratch scratch;
  const std::string fifo = scratch.dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const FileFlag log{"--event_log", fifo, FileUse::Write};

  SECTION("a FIFO without a reader: refused by what is there, not by ENXIO") {
    const auto opened = ddp::launcher::open_file(log, O_WRONLY | O_APPEND | O_CREAT);
    CHECK(opened.fd < 0);
    CHECK_THAT(opened.refused, Catch::StartsWith("--event_log=" + fifo + " is a FIFO"));
  }
  SECTION("a FIFO with a reader opens, and fstat refuses it") {
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(reader >= 0);
    CHECK_THAT(ddp::testing::usage_error_of([&] { ddp::launcher::open_file_flag(log, O_WRONLY | O_APPEND); }),
               Catch::StartsWith("--event_log=" + fifo + " is a FIFO"));
    ::close(reader);
  }
  SECTION("a FIFO opened for reading (no writer) is refused too") {
    const auto opened = ddp::launcher::open_file({"--progress_file", fifo, FileUse::ReadLater}, O_RDONLY);
    CHECK(opened.fd < 0);
    CHECK_THAT(opened.refused, Catch::StartsWith("--progress_file=" + fifo + " is a FIFO"));
  }
  SECTION("a regular file is created and left blocking; a missing input says ENOENT") {
    const std::string file = scratch.dir + "/e.jsonl";
    const int fd = ddp::launcher::open_file_flag({"--event_log", file, FileUse::Write}, O_WRONLY | O_CREAT);
    CHECK(std::filesystem::is_regular_file(file));
    CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    ::close(fd);
    const auto missing =
        ddp::launcher::open_file({"--progress_file", scratch.dir + "/no", FileUse::ReadLater}, O_RDONLY);
    CHECK(missing.fd < 0);
    CHECK(missing.error == ENOENT);
  }
  SECTION("/dev/null is an output") {
    const int fd = ddp::launcher::open_file_flag({"--event_log", "/dev/null", FileUse::Write}, O_WRONLY | O_APPEND);
    CHECK(fd >= 0);
    ::close(fd);
  }
}
