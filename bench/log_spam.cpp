// Log forwarding benchmark helper (bench_logs.py): a worker that prints numbered lines as fast as
// stdio lets it, and the checker that reads a launcher's combined output back.
//
//   log_spam write BYTES
//       Prints BYTES of 100-byte lines "r<RANK> <seq> <filler>\n" (RANK from the environment)
//       through stdio's default buffering, as a C or Python program would. With SPAM_TIME_DIR
//       set, writes its own elapsed seconds to SPAM_TIME_DIR/<RANK>.
//   log_spam verify FILE WORKERS BYTES
//       Checks FILE: every line must be a whole line of one worker, optionally behind a launcher
//       prefix "[...N]:" whose N is that worker's rank, with each rank's lines in order and none
//       missing. Prints "lines=L ok=K bad=B misprefixed=M missing=X out_of_order=O" and exits 0
//       only when all of B, M, X and O are zero. Other lines (a launcher's own) count as bad.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::size_t kLineBytes = 100;

// 'a'..'z' repeated, so a line's filler is one memcpy from the right offset.
struct Filler {
  char text[kLineBytes + 26];
  Filler() {
    for (std::size_t i = 0; i < sizeof text; ++i) text[i] = static_cast<char>('a' + i % 26);
  }
};
const Filler kFiller;

// The line for (rank, seq), '\n' included, into `out` (kLineBytes long): "r<rank> <seq, 10
// digits> " and then filler whose byte i is 'a' + (seq + i) % 26. Formatted by hand: printf per
// line would make the writer, not the launcher, the bottleneck.
void make_line(int rank, std::uint64_t seq, char* out) {
  char digits[12];
  int nd = 0;
  for (unsigned r = static_cast<unsigned>(rank); nd == 0 || r > 0; r /= 10)
    digits[nd++] = static_cast<char>('0' + r % 10);
  std::size_t head = 0;
  out[head++] = 'r';
  while (nd > 0) out[head++] = digits[--nd];
  out[head++] = ' ';
  std::uint64_t v = seq;
  for (int i = 9; i >= 0; --i, v /= 10) out[head + i] = static_cast<char>('0' + v % 10);
  head += 10;
  out[head++] = ' ';
  std::memcpy(out + head, kFiller.text + (seq + head) % 26, kLineBytes - 1 - head);
  out[kLineBytes - 1] = '\n';
}

int write_lines(std::uint64_t bytes) {
  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  const auto t0 = std::chrono::steady_clock::now();
  char line[kLineBytes];
  make_line(rank, 0, line);
  // Line seq+1 from line seq: bump the 10 digits in place and shift the filler by one letter.
  const std::size_t digits_end = static_cast<std::size_t>(std::strchr(line, ' ') - line) + 11;
  const std::size_t head = digits_end + 1;
  const std::uint64_t lines = bytes / kLineBytes;
  for (std::uint64_t seq = 0; seq < lines; ++seq) {
    if (seq > 0) {
      for (std::size_t i = digits_end - 1; line[i]++ == '9'; --i) line[i] = '0';
      std::memcpy(line + head, kFiller.text + (seq + head) % 26, kLineBytes - 1 - head);
    }
    std::fwrite(line, 1, kLineBytes, stdout);
  }
  std::fflush(stdout);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (const char* dir = std::getenv("SPAM_TIME_DIR")) {
    std::ofstream(std::string(dir) + "/" + std::to_string(rank)) << elapsed << "\n";
  }
  return 0;
}

int verify(const char* path, int workers, std::uint64_t bytes) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f) {
    std::perror(path);
    return 2;
  }
  const std::uint64_t expected = bytes / kLineBytes;
  std::vector<std::uint64_t> next(workers, 0);
  std::uint64_t total = 0, ok = 0, bad = 0, misprefixed = 0, out_of_order = 0;
  char* buf = nullptr;
  std::size_t cap = 0;
  char want[kLineBytes];
  for (ssize_t n; (n = ::getline(&buf, &cap, f)) > 0;) {
    ++total;
    std::string_view line(buf, static_cast<std::size_t>(n));
    int prefix_rank = -1;
    if (!line.empty() && line.front() == '[') {
      const auto close = line.find("]:");
      if (close == std::string_view::npos) {
        ++bad;
        continue;
      }
      std::size_t d = close;
      while (d > 1 && line[d - 1] >= '0' && line[d - 1] <= '9') --d;
      prefix_rank = d < close ? std::atoi(std::string(line.substr(d, close - d)).c_str()) : -1;
      line.remove_prefix(close + 2);
    }
    int rank = -1;
    unsigned long long seq = 0;
    if (line.size() != kLineBytes || std::sscanf(line.data(), "r%d %llu ", &rank, &seq) != 2 || rank < 0 ||
        rank >= workers) {
      ++bad;
      continue;
    }
    make_line(rank, seq, want);
    if (std::memcmp(line.data(), want, kLineBytes) != 0) {
      ++bad;
      continue;
    }
    if (prefix_rank >= 0 && prefix_rank != rank) ++misprefixed;
    if (seq != next[rank]) ++out_of_order;
    next[rank] = seq + 1;
    ++ok;
  }
  std::free(buf);
  std::fclose(f);
  std::uint64_t missing = 0;
  for (int r = 0; r < workers; ++r) missing += next[r] < expected ? expected - next[r] : 0;
  std::printf("lines=%llu ok=%llu bad=%llu misprefixed=%llu missing=%llu out_of_order=%llu\n",
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(ok),
              static_cast<unsigned long long>(bad), static_cast<unsigned long long>(misprefixed),
              static_cast<unsigned long long>(missing), static_cast<unsigned long long>(out_of_order));
  return bad == 0 && misprefixed == 0 && missing == 0 && out_of_order == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && argc == 3) return write_lines(std::strtoull(argv[2], nullptr, 10));
  if (mode == "verify" && argc == 5) return verify(argv[2], std::atoi(argv[3]), std::strtoull(argv[4], nullptr, 10));
  std::fprintf(stderr, "usage: log_spam write BYTES | log_spam verify FILE WORKERS BYTES\n");
  return 2;
}
