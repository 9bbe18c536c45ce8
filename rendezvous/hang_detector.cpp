#include "rendezvous/hang_detector.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace dlaunch::rendezvous {

HangDetector::HangDetector(std::string subject, std::chrono::milliseconds hang_timeout)
    : subject_(std::move(subject)), hang_timeout_(hang_timeout) {}

void HangDetector::OnGeneration(const std::vector<envmap::Node>& table, Clock::time_point now) {
  mark_.reset();
  nodes_.clear();
  if (hang_timeout_.count() <= 0) return;
  generation_began_ = now;
  nodes_.reserve(table.size());
  for (const envmap::Node& node : table) nodes_.push_back(Watch{node.host, true, std::nullopt, now});
}

std::vector<Action> HangDetector::OnHeartbeat(int node_rank, int silent_ms, Clock::time_point now) {
  if (node_rank < 0 || static_cast<std::size_t>(node_rank) >= nodes_.size()) return {};
  Watch& node = nodes_[static_cast<std::size_t>(node_rank)];
  std::vector<Action> out;
  if (silent_ms < 0) {
    out.push_back(Log{fmt::format("{}: node {} ({}) says its ranks have been silent for {}ms; counting 0", subject_,
                                  node_rank, node.host, silent_ms),
                      "heartbeats with a negative silence"});
    silent_ms = 0;
  }
  node.beat_at = now;
  // Never before this generation began: a beat sent before the agent heard of it
  // speaks of the last generation's ranks.
  node.quiet_since = std::max(now - std::chrono::milliseconds(silent_ms), generation_began_);
  return out;
}

void HangDetector::OnNodeFinished(int node_rank, Clock::time_point now) {
  if (node_rank < 0 || static_cast<std::size_t>(node_rank) >= nodes_.size()) return;
  Watch& node = nodes_[static_cast<std::size_t>(node_rank)];
  if (!node.running) return;
  node.running = false;
  node.quiet_since = std::max(node.quiet_since, now);
}

void HangDetector::OnJobEnd() { nodes_.clear(); }

std::optional<std::chrono::milliseconds> HangDetector::Check() {
  if (hang_timeout_.count() <= 0) return std::nullopt;
  std::optional<Clock::time_point> earliest_beat, latest_output;
  for (const Watch& node : nodes_) {
    if (!latest_output || node.quiet_since > *latest_output) latest_output = node.quiet_since;
    if (!node.running) continue;             // its end counts as output, and it beats no more
    if (!node.beat_at) return std::nullopt;  // not heard from in this generation yet
    if (!earliest_beat || *node.beat_at < *earliest_beat) earliest_beat = node.beat_at;
  }
  if (!earliest_beat || *earliest_beat < *latest_output) return std::nullopt;
  auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(*earliest_beat - *latest_output);
  if (silent < hang_timeout_) return std::nullopt;
  // Once reported, only output after the reported silence counts as progress. The
  // estimates move by the heartbeats' delays, so a small move is not output.
  auto slack = std::min<std::chrono::milliseconds>(std::chrono::seconds(1), hang_timeout_ / 2);
  if (mark_ && *latest_output <= *mark_ + slack) return std::nullopt;
  mark_ = latest_output;
  return silent;
}

}  // namespace dlaunch::rendezvous
