#include "rendezvous/query_router.hpp"

#include <iterator>
#include <utility>

#include <fmt/format.h>

namespace dlaunch::rendezvous {

QueryRouter::QueryRouter(std::string subject, bool hang_stop) : subject_(std::move(subject)), hang_stop_(hang_stop) {}

std::vector<Action> QueryRouter::OnGeneration(const std::vector<ConnId>& conns,
                                              const std::vector<envmap::Node>& table) {
  // A new generation is new progress: whatever hang was being looked at is gone,
  // and what was asked of the last generation's ranks has no answer to wait for.
  FinishAll("a new generation began before it answered");
  running_ = true;
  members_.clear();
  int first_rank = 0;
  for (std::size_t r = 0; r < conns.size() && r < table.size(); ++r) {
    members_[conns[r]] = Member{static_cast<int>(r), table[r].host, first_rank, table[r].nproc, false};
    first_rank += table[r].nproc;
  }
  return Flush();
}

std::vector<Action> QueryRouter::OnNodeDone(ConnId conn) {
  if (auto it = members_.find(conn); it != members_.end()) it->second.done = true;
  // Its ranks have finished: there is nothing left of it to sample.
  std::vector<int> answered;
  for (auto& [id, q] : queries_) {
    auto asked = q.asked.find(conn);
    if (asked == q.asked.end()) continue;
    q.nodes[asked->second].problem = "its ranks finished before it answered";
    q.asked.erase(asked);
    if (q.asked.empty()) answered.push_back(id);
  }
  FinishEach(answered);
  return Flush();
}

std::vector<Action> QueryRouter::OnNodeGone(ConnId conn, const std::string& what) {
  members_.erase(conn);
  // An on-demand query goes on without it; the hang query waits for its deadline.
  std::vector<int> answered;
  for (auto& [id, q] : queries_) {
    if (q.hang) continue;
    auto asked = q.asked.find(conn);
    if (asked == q.asked.end()) continue;
    q.nodes[asked->second].problem = what;
    q.asked.erase(asked);
    if (q.asked.empty()) answered.push_back(id);
  }
  FinishEach(answered);
  return Flush();
}

std::vector<Action> QueryRouter::OnStandby() { return Stop("the generation stopped before it answered"); }

std::vector<Action> QueryRouter::OnJobEnd() { return Stop("the job ended before it answered"); }

std::vector<Action> QueryRouter::Stop(const std::string& problem) {
  FinishAll(problem);
  running_ = false;
  members_.clear();
  return Flush();
}

std::vector<Action> QueryRouter::OnReport(ConnId conn, const std::string& name, const Report& report) {
  auto ignore = [&](const std::string& why) {
    out_.push_back(Log{fmt::format("{}: ignoring a report for query {} from {} ({})", subject_, report.id, name, why),
                       "ignored messages"});
    return Flush();
  };
  auto open = queries_.find(report.id);
  if (open == queries_.end()) return ignore("no such query is open");
  OpenQuery& q = open->second;
  auto asked = q.asked.find(conn);
  if (asked == q.asked.end()) return ignore("it was not asked, or has answered already");
  if (report.node_rank != asked->second) return ignore(fmt::format("it says it is node {}", report.node_rank));
  NodeStacks& node = q.nodes[asked->second];
  if (report.items.size() > static_cast<std::size_t>(node.nproc)) {
    return ignore(fmt::format("{} items for {} ranks", report.items.size(), node.nproc));
  }
  std::size_t bytes = 0;
  for (const std::string& item : report.items) bytes += item.size();
  q.asked.erase(asked);
  if (q.bytes + bytes > kMaxHangReportBytes) {
    node.problem =
        fmt::format("its report of {} bytes is over the {} MiB kept for one query", bytes, kMaxHangReportBytes >> 20);
  } else {
    q.bytes += bytes;
    node.answered = true;
    node.items = report.items;
  }
  if (q.asked.empty()) Finish(report.id);
  return Flush();
}

std::vector<Action> QueryRouter::OnTick(Clock::time_point now) {
  std::vector<int> expired;
  for (const auto& [id, q] : queries_)
    if (now >= q.deadline) expired.push_back(id);
  FinishEach(expired);
  return Flush();
}

std::vector<Action> QueryRouter::Ask(std::uint64_t tag, const std::string& what, std::chrono::milliseconds timeout,
                                     Clock::time_point now) {
  std::size_t open = queries_.size() - (hang_query_ ? 1 : 0);
  if (!running_) {
    out_.push_back(QueryAnswered{tag, what, {}, "no generation is running"});
  } else if (open >= kMaxOpenQueries) {
    out_.push_back(QueryAnswered{tag, what, {}, fmt::format("{} queries are open already", open)});
  } else {
    int id = OpenToAll(what, false, timeout, now);
    queries_.at(id).tag = tag;
    if (queries_.at(id).asked.empty()) Finish(id);  // every node has finished
  }
  return Flush();
}

std::vector<Action> QueryRouter::AskForHang(std::chrono::milliseconds silent, Clock::time_point now) {
  int id = OpenToAll("stacks", true, kHangReportTimeout, now);
  hang_query_ = id;
  OpenQuery& q = queries_.at(id);
  q.silent = silent;
  out_.push_back(HangSuspected{silent, static_cast<int>(q.asked.size())});
  return Flush();
}

int QueryRouter::OpenToAll(const std::string& what, bool hang, std::chrono::milliseconds timeout,
                           Clock::time_point now) {
  int id = ++query_ids_;
  OpenQuery& q = queries_[id];
  q.hang = hang;
  q.what = what;
  q.timeout = timeout;
  q.deadline = now + timeout;
  for (const auto& [conn, member] : members_) {
    // A hang query names only the nodes it asked, as before.
    if (hang && member.done) continue;
    NodeStacks& node = q.nodes[member.node_rank];
    node.node_rank = member.node_rank;
    node.host = member.host;
    node.first_rank = member.first_rank;
    node.nproc = member.nproc;
    if (member.done) {
      node.problem = "its ranks have finished";
      continue;
    }
    q.asked[conn] = member.node_rank;
    out_.push_back(Send{conn, Query{id, what}});
  }
  return id;
}

bool QueryRouter::Finish(int id, const std::string& problem) {
  auto it = queries_.find(id);
  if (it == queries_.end()) return true;
  OpenQuery q = std::move(it->second);
  queries_.erase(it);
  if (q.hang) hang_query_.reset();
  for (const auto& [conn, node_rank] : q.asked)
    q.nodes[node_rank].problem =
        problem.empty() ? fmt::format("no answer within {}", FormatDuration(q.timeout)) : problem;
  std::vector<NodeStacks> nodes;
  for (auto& [node_rank, node] : q.nodes) nodes.push_back(std::move(node));
  if (!q.hang) {
    out_.push_back(QueryAnswered{q.tag, q.what, std::move(nodes), {}});
    return true;
  }
  out_.push_back(HangReport{q.silent, std::move(nodes), hang_stop_});
  return !hang_stop_;
}

void QueryRouter::FinishEach(const std::vector<int>& ids) {
  for (int id : ids)
    if (!Finish(id)) return;  // the job ends: OnJobEnd answers the rest
}

void QueryRouter::FinishAll(const std::string& problem) {
  if (hang_query_) queries_.erase(*hang_query_);
  hang_query_.reset();
  std::vector<int> ids;
  for (const auto& [id, q] : queries_) ids.push_back(id);
  for (int id : ids) Finish(id, problem);
}

std::optional<Clock::time_point> QueryRouter::NextDeadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, q] : queries_)
    if (!next || q.deadline < *next) next = q.deadline;
  return next;
}

}  // namespace dlaunch::rendezvous
