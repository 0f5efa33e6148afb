// A one-shot "give up now" from one thread to a wait blocked on another: cancel() makes fd()
// readable (an eventfd), so the waiter polls it beside its own descriptors and wakes at once,
// with no polling interval. Once cancelled it stays cancelled.
#pragma once

namespace ddp {

class CancelEvent {
 public:
  // Throws Error when the eventfd cannot be made (the descriptor limit).
  CancelEvent();
  ~CancelEvent();
  CancelEvent(const CancelEvent&) = delete;
  CancelEvent& operator=(const CancelEvent&) = delete;

  // Wakes every poll on fd(), now and later. Never blocks; never throws; thread-safe and
  // async-signal-safe (one write(2)).
  void cancel();
  // Whether cancel() was called. Never blocks; thread-safe.
  bool cancelled() const;
  // Readable (POLLIN) once cancelled; close-on-exec. Never read it: it must stay readable.
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace ddp
