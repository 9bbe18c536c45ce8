#include "launcher/process/summary.hpp"

#include <fstream>
#include <sstream>

#include <boost/json.hpp>
#include <fmt/format.h>

#include "launcher/core/text.hpp"
#include "launcher/process/worker_group.hpp"

namespace dlaunch::launcher {

std::string ErrorFilePath(const std::string& private_dir, int restart, int local_rank) {
  return fmt::format("{}/error-{}-{}.json", private_dir, restart, local_rank);
}

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
double Seconds(const WorkerRecord& w) { return std::chrono::duration<double>(w.ended - w.started).count(); }
}  // namespace

std::vector<std::string> FailureSummary(int exit_code, const WorkerReport* cause,
                                        const std::vector<WorkerReport>& others, int stop_signal) {
  std::vector<std::string> lines;
  if (stop_signal != 0) {
    lines.push_back(fmt::format("stopped by {}; exit code {}", SignalName(stop_signal), exit_code));
  } else {
    lines.push_back(fmt::format("job failed with exit code {}", exit_code));
  }
  // A worker's own 123 or 124 is not passed on: say so, or the 1 looks made up.
  if (cause != nullptr && exit_code == JobCode(cause->record.status)) {
    std::string note = JobCodeNote(cause->rank, cause->record.status);
    if (!note.empty()) lines.push_back(note);
  }
  if (cause != nullptr) {
    const WorkerRecord& w = cause->record;
    lines.push_back(fmt::format("root cause: rank {} (local_rank {}, pid {}) {} after {:.2f}s", cause->rank,
                                w.local_rank, w.pid, Describe(w.status), Seconds(w)));
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

NodeEnd GatherEnd(const WorkerGroup& group, const std::string& private_dir) {
  const SupervisorSet& s = group.supervisor();
  NodeEnd end;
  end.exit_code = s.exit_code();
  end.stop_signal = s.stop_signal();
  for (const WorkerRecord& w : s.workers()) {
    WorkerReport r;
    r.record = w;
    r.rank = group.RankOf(w.local_rank);
    r.record.local_rank = group.ToldLocalRank(w.local_rank);
    end.workers.push_back(r);
  }
  if (const WorkerRecord* root = s.root_cause()) {
    WorkerReport r = end.workers[static_cast<size_t>(root->local_rank)];
    std::ifstream f(ErrorFilePath(private_dir, root->restart, root->local_rank));
    std::stringstream text;
    text << f.rdbuf();
    if (f) r.error_message = ErrorFileMessage(text.str());
    r.stderr_tail = group.stderr_tail(static_cast<size_t>(root->local_rank)).LastLines(5);
    end.cause = r;
  }
  return end;
}

std::vector<std::string> NodeEndLines(const NodeEnd& end) {
  std::vector<std::string> lines;
  if (!end.hang_cause.empty() && end.stop_signal == 0) {
    lines.push_back(fmt::format("job stopped after a hang; exit code {}", end.exit_code));
    lines.insert(lines.end(), end.hang_cause.begin(), end.hang_cause.end());
  } else if ((end.exit_code != 0 && end.cause) || end.stop_signal != 0) {
    lines = FailureSummary(end.exit_code, end.cause ? &*end.cause : nullptr, end.workers, end.stop_signal);
  }
  lines.insert(lines.end(), end.kill_stacks.begin(), end.kill_stacks.end());
  return lines;
}

}  // namespace dlaunch::launcher
