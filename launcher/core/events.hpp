// --events FILE: what happens to a job, one JSON object per line, each written
// with one write() as it happens, so `tail -f` and a collector see it at once
// and lines of concurrent writers never interleave. The schema is
// docs/events.schema.json; docs/events.md describes each event.
//
// Every event has "event", "time" (UTC, RFC 3339 with microseconds), "run_id"
// and, where known, "node_rank"; the rest is the event's. Every line is valid
// UTF-8: a byte that is not becomes U+FFFD.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "base/status.hpp"

namespace dlaunch::launcher {

class EventLog {
 public:
  // A log that writes nothing (no --events).
  EventLog() = default;
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Opens `path` for appending (a FIFO too: it is opened without blocking on a
  // reader that is not there, and an event it cannot take at once is dropped
  // and counted, never waited for). A symbolic link at `path` is followed only
  // when this user or root owns it. Fails naming --events and the path,
  // first with what Check refuses.
  Status Open(const std::string& path);
  // What Open would refuse, found without opening or making anything (so
  // --explain refuses what the run would, with the same line): a symbolic link
  // another user owns, something there that is not a file, a FIFO or a device,
  // a file this user cannot write, or a directory where no file can be made
  // (MayMakeIn). A FIFO with no reader is found by Open alone.
  static Status Check(const std::string& path);
  bool enabled() const { return fd_ >= 0; }

  // What every later event carries.
  void SetRunId(std::string run_id) { run_id_ = std::move(run_id); }
  void SetNodeRank(int node_rank) { node_rank_ = node_rank; }

  void Emit(std::string_view event, boost::json::object fields = {});

  // `observer` (or empty) sees every event from now on, its name and its own
  // fields, written or not (with no --events too), before it is written: the
  // metrics count hangs, stacks and restarts from what the parts report here
  // (launcher/metrics/metrics.hpp), rather than each part keeping counts.
  using Observer = std::function<void(std::string_view event, const boost::json::object& fields)>;
  void Observe(Observer observer) { observer_ = std::move(observer); }

  // The root cause job_finished reports: the first one set wins, as the first
  // failure is the cause and what follows are its effects.
  void SetRootCause(const std::string& cause) {
    if (root_cause_.empty()) root_cause_ = cause;
  }
  const std::string& root_cause() const { return root_cause_; }

  // Events that could not be written (a full pipe, a full disk).
  size_t dropped() const { return dropped_; }

 private:
  int fd_ = -1;
  std::string run_id_;
  int node_rank_ = -1;
  std::string root_cause_;
  size_t dropped_ = 0;
  Observer observer_;
};

}  // namespace dlaunch::launcher
