// See progress_reporter.hpp.
#include "launcher/kubeflow/progress_reporter.hpp"

#include <fstream>
#include <sstream>
#include <type_traits>
#include <variant>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/etcd/etcd_tls_process.hpp"
#include "launcher/watch/progress_file.hpp"

namespace ddp::launcher {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot read the token file {} (KUBEFLOW_TRAINER_STATUS_TOKEN)", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return token;
}

}  // namespace

ProgressReporter::ProgressReporter(ProgressReporterOptions options) : o_(std::move(options)) {
  latest_.state = "joining";
  latest_.max_restarts = o_.max_restarts;
  thread_ = std::thread([this] { run(); });
}

ProgressReporter::~ProgressReporter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ProgressReporter::on_event(const RoundEvent& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::visit(
      [this](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, RoundJoined>) {
          reporter_ = e.view.group_rank == 0;
          latest_.round = e.view.round;
          latest_.restarts = e.view.restarts;
          latest_.state = "running";
        } else if constexpr (std::is_same_v<E, RoundFailed>) {
          latest_.root_cause = e.failed.cause();
          latest_.state = "failed";
        } else if constexpr (std::is_same_v<E, JobRestarting>) {
          latest_.restarts = e.restart;
          latest_.state = "restarting";
        } else if constexpr (std::is_same_v<E, JobEnded>) {
          latest_.state = e.exit_code == 0 ? "succeeded" : "failed";
          if (e.exit_code == 0) latest_.percentage = 100;
          if (!e.root_text.empty()) latest_.root_cause = e.root_text;
          ended_ = true;
        } else {
          return;  // the others change nothing reported
        }
        dirty_ = true;
      },
      event);
  changed_.notify_all();
}

void ProgressReporter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto next = std::chrono::steady_clock::now();
  bool sent = false;
  for (;;) {
    // Waits for the job's end, for a stop, for the first thing to say (at once), or for the
    // interval to pass: then a state change, or (while it runs) the same state with
    // --progress_file read anew.
    const auto first = [this, &sent] { return dirty_ && reporter_ && !sent; };
    changed_.wait_until(lock, next, [this, &first] { return stop_ || ended_ || first(); });
    if (stop_ && !ended_) return;
    const bool last = ended_;
    if (std::chrono::steady_clock::now() < next && !last && !first()) continue;
    if (reporter_ && (dirty_ || last || latest_.state == "running")) {
      TrainerProgress progress = latest_;
      dirty_ = false;
      sent = true;
      lock.unlock();
      send(std::move(progress));
      lock.lock();
    }
    if (last) return;
    next = std::chrono::steady_clock::now() + o_.interval;
  }
}

void ProgressReporter::send(TrainerProgress progress) {
  if (!o_.progress_file.empty()) {
    const ProgressFileReading reading = read_progress_file(o_.progress_file);
    if (reading.known()) progress.iteration = reading.iteration;
  }
  progress.at = std::chrono::system_clock::now();
  try {
    post(trainer_status_json(progress));
    if (failing_) log::info("kubeflow trainer status: reported to {} again", o_.endpoint.url);
    failing_ = false;
  } catch (const Error& e) {
    // Never the job's failure: the endpoint may be down, or not deployed with the feature gate.
    if (!failing_) {
      log::warning("kubeflow trainer status: cannot report to {}: {}; the job goes on (next try in {})",
                   o_.endpoint.url, e.what(), format_seconds(o_.interval));
    } else {
      log::debug("kubeflow trainer status: {}", e.what());
    }
    failing_ = true;
  }
}

std::string ProgressReporter::endpoint_text() const {
  return rendezvous::format_endpoint(o_.endpoint.host, static_cast<std::uint16_t>(std::stoi(o_.endpoint.port)));
}

std::string ProgressReporter::post(const std::string& body) {
  if (proxy_.empty()) {
    TlsProxyStart start;
    start.members = {endpoint_text()};
    start.ca_file = o_.endpoint.ca_file;
    start.purpose = "Kubeflow Trainer's status endpoint";
    proxy_ = start_tls_proxy(start).at(0);
  }
  const std::size_t colon = proxy_.rfind(':');
  http::request<http::string_body> request{http::verb::post, o_.endpoint.path, 11};
  request.set(http::field::host, endpoint_text());
  request.set(http::field::content_type, "application/json");
  request.set(http::field::authorization, "Bearer " + read_token(o_.endpoint.token_file));
  request.body() = body;
  request.prepare_payload();

  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  beast::error_code failed;
  stream.expires_after(o_.timeout);
  tcp::resolver resolver(io);
  resolver.async_resolve(proxy_.substr(0, colon), proxy_.substr(colon + 1), [&](beast::error_code ec, auto found) {
    if (ec) return void(failed = ec);
    stream.async_connect(found, [&](beast::error_code ec2, auto) {
      if (ec2) return void(failed = ec2);
      http::async_write(stream, request, [&](beast::error_code ec3, std::size_t) {
        if (ec3) return void(failed = ec3);
        http::async_read(stream, buffer, response, [&](beast::error_code ec4, std::size_t) { failed = ec4; });
      });
    });
  });
  io.run();
  if (failed) {
    // The proxy closes the connection when the TLS handshake fails (its reason on stderr).
    throw Error(fmt::format("{} (the TLS proxy's own line above says more when the handshake failed)", failed.message()));
  }
  if (response.result_int() / 100 != 2) {
    throw Error(fmt::format("HTTP {}: {}", response.result_int(), response.body().substr(0, 200)));
  }
  return response.body();
}

}  // namespace ddp::launcher
