#include "rendezvous/restart_policy.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dlaunch::rendezvous {

RestartPolicy::RestartPolicy(RestartRules rules) : rules_(rules) {}

void RestartPolicy::Started(Clock::time_point now) {
  started_ = now;
  reported_ = false;
}

void RestartPolicy::Progress(int rank, std::int64_t value) {
  if (value < 0) return;
  reported_ = true;
  auto [it, inserted] = best_.try_emplace(rank, value);
  if (!inserted) it->second = std::max(it->second, value);
}

bool RestartPolicy::PassedLevel() const {
  // Walks the ranks once per failure, not per report: a report only stores.
  for (const auto& [rank, value] : best_) {
    auto before = at_fail_.find(rank);
    if (before == at_fail_.end() || value > before->second) return true;
  }
  return false;
}

std::chrono::milliseconds RestartPolicy::Backoff(bool healthy) {
  if (healthy) quick_failures_ = 0;
  if (rules_.backoff_max.count() <= 0) return std::chrono::milliseconds(0);
  std::chrono::milliseconds wait = rules_.backoff_min;
  for (int i = 0; i < quick_failures_ && wait < rules_.backoff_max; ++i) wait *= 2;
  ++quick_failures_;
  return std::min(wait, rules_.backoff_max);
}

RestartDecision RestartPolicy::Failed(Failure kind, Clock::time_point now) {
  bool healthy = started_ && now - *started_ >= rules_.healthy_run;
  // A generation in which no rank reported counts by how long it ran.
  bool progress = reported_ ? PassedLevel() : healthy;
  // Only a restart of a failing script counts toward no progress.
  bool counted = !progress && kind == Failure::kWorker && restarted_;
  started_.reset();
  at_fail_ = best_;
  reported_ = false;
  if (progress) no_progress_ = 0;
  if (counted) ++no_progress_;
  RestartDecision d;
  if (counted && rules_.max_no_progress_restarts >= 0 && no_progress_ >= rules_.max_no_progress_restarts) {
    d.verdict = RestartDecision::Verdict::kNoProgress;
    d.why = fmt::format("{} restart{} in a row made no progress (no rank passed its progress at the failure before)",
                        no_progress_, no_progress_ == 1 ? "" : "s");
    return d;
  }
  if (restarts_ >= rules_.max_restarts) {
    d.verdict = RestartDecision::Verdict::kExhausted;
    return d;
  }
  ++restarts_;
  restarted_ = true;
  d.verdict = RestartDecision::Verdict::kRestart;
  if (kind == Failure::kWorker) d.wait = Backoff(healthy);
  return d;
}

}  // namespace dlaunch::rendezvous
