// The coordinator's query router: the questions asked of every running node (the
// stacks query of a suspected hang, and the on-demand ones of Coordinator::Ask),
// each under its own Query id, and the Reports that answer them. A state machine
// with no sockets and no clock, like the coordinator it serves (coordinator.hpp):
// events go in, actions come out (Send of a Query, Log, HangSuspected, HangReport,
// QueryAnswered). One thread calls it.
//
// It knows the nodes of the running generation from OnGeneration until OnJobEnd,
// and hears of each that finishes (OnNodeDone) or goes away (OnNodeGone). A query
// is answered once every node asked has answered, finished, or (on-demand only)
// gone; or at its deadline, each node not answered named with "no answer within
// 15s"; or at once when a new generation begins or the job ends. A Report that is
// not for an open query, comes from a node that was not asked (or already
// answered), names another node or carries more items than the node has ranks is
// ignored with one Log line; a node's items are kept only while the query holds
// under kMaxHangReportBytes in all.
//
// A HangReport with `stop` set (hang_stop) asks the caller to end the job at once:
// after it, the router answers no other query from the same call and leaves them
// open for OnJobEnd to answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/coordinator.hpp"

namespace dlaunch::rendezvous {

class QueryRouter {
 public:
  // `subject` starts its log lines ("rendezvous head:29400"); `hang_stop` goes
  // into every HangReport.
  QueryRouter(std::string subject, bool hang_stop);

  // A new generation: `conns` by node rank, `table` its node table. The open
  // on-demand queries are answered ("a new generation began before it answered")
  // and the hang query is dropped unanswered.
  std::vector<Action> OnGeneration(const std::vector<ConnId>& conns, const std::vector<envmap::Node>& table);
  // The node on `conn` sent Done: it is named as finished in the queries that
  // asked it, and is not asked again.
  std::vector<Action> OnNodeDone(ConnId conn);
  // The node on `conn` is gone, `what` says how ("left"): on-demand queries name
  // it so; the hang query waits for its deadline.
  std::vector<Action> OnNodeGone(ConnId conn, const std::string& what);
  // The job ended: every open query is answered as OnGeneration does, with
  // "the job ended before it answered"; Ask is answered at once from now on.
  std::vector<Action> OnJobEnd();
  // The generation stopped and the job waits for its next one: open queries are
  // answered ("the generation stopped before it answered") and no node runs.
  std::vector<Action> OnStandby();

  // A Report from the joined agent on `conn`; `name` names it in a log line
  // ("node 1 (b)", "host 'c'").
  std::vector<Action> OnReport(ConnId conn, const std::string& name, const Report& report);
  // Answers every query whose deadline is at or before `now`.
  std::vector<Action> OnTick(Clock::time_point now);

  // Asks every running node `what`; QueryAnswered{tag} follows, now or from a
  // later call. At once, with a problem, while no generation runs or when
  // kMaxOpenQueries are open.
  std::vector<Action> Ask(std::uint64_t tag, const std::string& what, std::chrono::milliseconds timeout,
                          Clock::time_point now);
  // Asks every running node that has not finished for its stacks, the job having
  // been silent for `silent`: Query to each, then HangSuspected. Its HangReport
  // follows within kHangReportTimeout. At most one is open (hang_open()).
  std::vector<Action> AskForHang(std::chrono::milliseconds silent, Clock::time_point now);

  bool hang_open() const { return hang_query_.has_value(); }
  std::size_t open() const { return queries_.size(); }
  std::optional<Clock::time_point> NextDeadline() const;

 private:
  // A node of the running generation, as a query names it.
  struct Member {
    int node_rank = 0;
    std::string host;
    int first_rank = 0;
    int nproc = 0;
    bool done = false;
  };
  struct OpenQuery {
    bool hang = false;
    std::uint64_t tag = 0;  // on demand: the caller's
    std::string what;
    Clock::time_point deadline;
    std::chrono::milliseconds timeout{0};
    std::chrono::milliseconds silent{0};
    std::map<ConnId, int> asked;      // not answered yet -> node rank
    std::map<int, NodeStacks> nodes;  // by node rank
    std::size_t bytes = 0;            // of the items kept
  };

  // Sends `what` to every running node that has not finished; returns the id.
  int OpenToAll(const std::string& what, bool hang, std::chrono::milliseconds timeout, Clock::time_point now);
  // Answers query `id`; the nodes not answered yet get `problem` (empty: no
  // answer within its timeout). Returns false when that was a stopping HangReport.
  bool Finish(int id, const std::string& problem = {});
  // Finishes `ids` in order, up to a stopping HangReport.
  void FinishEach(const std::vector<int>& ids);
  // Answers every on-demand query with `problem`; drops the hang query.
  void FinishAll(const std::string& problem);
  // No generation runs (a standby, the end): every open query is answered with
  // `problem`, and nothing is asked until the next OnGeneration.
  std::vector<Action> Stop(const std::string& problem);
  std::vector<Action> Flush() { return std::exchange(out_, {}); }

  std::string subject_;
  bool hang_stop_ = false;
  bool running_ = false;
  std::map<ConnId, Member> members_;
  std::map<int, OpenQuery> queries_;  // by id
  std::optional<int> hang_query_;     // the id of the open hang query
  int query_ids_ = 0;
  std::vector<Action> out_;
};

}  // namespace dlaunch::rendezvous
