#include "launcher/process/summary.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

std::optional<std::string> ErrorFileMessage(const std::string& json_text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json_text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const boost::json::value* m = v.as_object().if_contains("message");
  if (m == nullptr) return std::nullopt;
  if (m->is_string()) return std::string(m->as_string());
  if (m->is_object()) {
    const boost::json::value* inner = m->as_object().if_contains("message");
    if (inner != nullptr && inner->is_string()) return std::string(inner->as_string());
  }
  return std::nullopt;
}

namespace {
double Seconds(const WorkerRecord& w) {
  return std::chrono::duration<double>(w.ended - w.started).count();
}
}  // namespace

std::vector<std::string> FailureSummary(int exit_code, const WorkerReport* cause,
                                        const std::vector<WorkerReport>& others, int stop_signal) {
  std::vector<std::string> lines;
  if (stop_signal != 0) {
    lines.push_back(fmt::format("stopped by {}; exit code {}", SignalName(stop_signal), exit_code));
  } else {
    lines.push_back(fmt::format("job failed with exit code {}", exit_code));
  }
  if (cause != nullptr) {
    const WorkerRecord& w = cause->record;
    lines.push_back(fmt::format("root cause: rank {} (local_rank {}, pid {}) {} after {:.2f}s",
                                cause->rank, w.local_rank, w.pid, Describe(w.status), Seconds(w)));
    if (cause->error_message) {
      for (const std::string& l : Split(*cause->error_message, '\n'))
        if (!l.empty()) lines.push_back("  | " + l);
    } else {
      for (const std::string& l : cause->stderr_tail) lines.push_back("  | " + l);
    }
  }
  std::string stopped;
  for (const WorkerReport& r : others) {
    if (cause != nullptr && r.record.local_rank == cause->record.local_rank) continue;
    if (r.record.pid == 0) continue;
    if (!stopped.empty()) stopped += ", ";
    stopped += r.record.running ? fmt::format("rank {} still running", r.rank)
                                : fmt::format("rank {} {}", r.rank, Describe(r.record.status));
  }
  if (!stopped.empty()) lines.push_back("others: " + stopped);
  return lines;
}

}  // namespace dlaunch::launcher
