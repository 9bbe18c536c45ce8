// The live view of a whole multi-node job: the process that hosts the
// coordinator (the hosting agent, multinode.cpp; the head, head.cpp) answers
// `dlaunch status` and `dlaunch stacks` for every node, asking each through the
// coordinator (CoordinatorServer::Ask) and merging the answers. A node that does
// not answer within the query's deadline is named in the reply's "missing" list.
// The reply has the fields of a node's own reply (live.hpp) plus "job_wide": true
// and "missing": ["node 1 (b), ranks 2-3: no answer within 2s", ...]; the client
// prefers it to the node-local replies of the same run id. Everything runs on the
// event loop's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "base/defaults.hpp"
#include "launcher/core/console.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/live/live.hpp"
#include "rendezvous/coordinator.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

// How long the nodes have to answer: status under the client's 3 s, stacks as a hang's.
inline constexpr std::chrono::milliseconds kJobStatusTimeout{2000};  // Default: 2s
inline constexpr std::chrono::milliseconds kJobStacksTimeout = base::kStacksAnswerTimeout;

// The rows of an answered "status" query, by rank: every item of every node that
// answered, parsed (rendezvous input: bounded, never throws). `missing` gets one
// line per node that did not answer ("node 1 (b), ranks 2-3: no answer within
// 2s") and per item that is not a row of that node's ranks.
boost::json::array RowsOfAnswer(const rendezvous::QueryAnswered& answer, std::vector<std::string>& missing);

// Answers with the whole job of `job.run_id` on `server`, which must outlive it;
// "ranks" is the job's (of the nodes asked). A question whose answer does not
// come is left to the server's answer_timeout.
class JobLiveSource : public LiveSource {
 public:
  JobLiveSource(rendezvous::CoordinatorServer& server, LiveJob job);
  void Status(std::function<void(boost::json::object)> reply) override;
  void Stacks(std::function<void(boost::json::object)> reply) override;

 private:
  void Answered(const rendezvous::QueryAnswered& answer);
  boost::json::object Header(int ranks) const;

  rendezvous::CoordinatorServer& server_;
  LiveJob job_;
  std::map<std::uint64_t, std::function<void(boost::json::object)>> waiting_;  // by tag
  std::uint64_t next_tag_ = 1;
  Lifetime life_;  // last: expires first
};

// A LiveSource that forwards to the job view once there is one, else to this
// node's own source: the socket is made before the process knows whether it
// hosts the coordinator.
class SwitchLiveSource : public LiveSource {
 public:
  explicit SwitchLiveSource(LiveSource& node) : node_(node) {}
  // `job` (or null) serves from now on; it must stay alive until replaced.
  void SetJob(LiveSource* job) { job_ = job; }
  void Status(std::function<void(boost::json::object)> reply) override { Pick().Status(std::move(reply)); }
  void Stacks(std::function<void(boost::json::object)> reply) override { Pick().Stacks(std::move(reply)); }

 private:
  LiveSource& Pick() { return job_ != nullptr ? *job_ : node_; }
  LiveSource& node_;
  LiveSource* job_ = nullptr;
};

// The live view's socket path for `run_id` in the per-user directory (made now,
// so a watchdog forked next can remove the socket if this process is killed), or
// the refusal of an unsafe directory.
Result<std::string> LiveSocketPath(const envmap::EnvMap& env, const std::string& run_id);
// The server on `path`, or none after one line when the directory was refused or
// the socket cannot be made; the job runs either way.
std::unique_ptr<LiveServer> StartLiveView(boost::asio::io_context& io, Console& console,
                                          const Result<std::string>& path, LiveSource& source);
// Now, as --events writes times: UTC, RFC 3339.
std::string UtcNow();

}  // namespace dlaunch::launcher
