// Reports the job's state to Kubeflow Trainer's progress endpoint (trainer_status.hpp) when the
// pod has KUBEFLOW_TRAINER_STATUS_URL: a RoundListener (events/round_events.hpp) that keeps the
// latest TrainerProgress, and a thread of its own that POSTs it, so the agent's loop never waits
// for the network.
//   - Only the node of group rank 0 reports: one voice per job (the endpoint rate-limits per
//     service account, and every node's launcher knows the job's outcome and root cause).
//   - At most one POST per `interval` (default 30 s): a state change waits for the interval's end;
//     while nothing changes the state is sent again each interval with --progress_file read anew.
//     The job's end is sent at once (bounded by `timeout`), then the thread ends.
//   - TLS through ddplaunch-etcd-tls (etcd/etcd_tls_process.hpp: the endpoint's certificate
//     checked against KUBEFLOW_TRAINER_STATUS_CA_CERT and its host name); the bearer token read
//     from its file for each POST (Kubernetes rotates it).
//   - A failure never fails the job: the first is a warning naming the URL and the reason, later
//     ones are debug lines until a POST succeeds again (said once at info).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "launcher/events/round_events.hpp"
#include "launcher/kubeflow/trainer_status.hpp"

namespace ddp::launcher {

struct ProgressReporterOptions {
  TrainerStatusEndpoint endpoint;
  std::string progress_file;  // --progress_file ("": none)
  int max_restarts = 0;
  std::chrono::milliseconds interval{std::chrono::seconds(30)};
  std::chrono::milliseconds timeout{std::chrono::seconds(5)};  // one POST, connect to answer
};

class ProgressReporter : public RoundListener {
 public:
  // Does not block: the proxy starts on the reporter's thread, at the first POST.
  explicit ProgressReporter(ProgressReporterOptions options);
  // Sends what JobEnded left unsent (bounded by the timeout), stops the thread.
  ~ProgressReporter() override;
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // On the agent's loop; never blocks beyond a mutex, never throws.
  void on_event(const RoundEvent& event) override;

 private:
  void run();
  void send(TrainerProgress progress);
  std::string post(const std::string& body);  // throws Error saying why it failed
  std::string endpoint_text() const;          // "host:port" of the endpoint

  ProgressReporterOptions o_;
  std::mutex mutex_;
  std::condition_variable changed_;
  TrainerProgress latest_;
  bool reporter_ = false;  // this node reports (group rank 0 in the last round joined)
  bool dirty_ = false;
  bool ended_ = false;  // JobEnded: send once more, then stop
  bool stop_ = false;
  std::string proxy_;   // "127.0.0.1:PORT" once started
  bool failing_ = false;
  std::thread thread_;
};

}  // namespace ddp::launcher
