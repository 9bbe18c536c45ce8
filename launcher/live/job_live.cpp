#include "launcher/live/job_live.hpp"

#include <unistd.h>

#include <algorithm>
#include <ctime>

#include <boost/json/parse.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "launcher/jobwide/job_hang.hpp"
#include "launcher/jobwide/node_items.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

namespace rdzv = dlaunch::rendezvous;

namespace {

// The row's integer field `key`, or nullopt.
std::optional<int64_t> IntField(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (const int64_t* i = v->if_int64()) return *i;
  if (const uint64_t* u = v->if_uint64(); u != nullptr && *u <= INT64_MAX) return static_cast<int64_t>(*u);
  return std::nullopt;
}

}  // namespace

boost::json::array RowsOfAnswer(const rdzv::QueryAnswered& answer, std::vector<std::string>& missing) {
  std::function<Result<RankedItem<boost::json::value>>(const std::string&)> parse = [](const std::string& item) {
    using Row = Result<RankedItem<boost::json::value>>;
    // An item is at most kMaxString bytes (the codec's cap); the depth is capped here.
    boost::system::error_code ec;
    boost::json::parse_options opts;
    opts.max_depth = 8;
    boost::json::value v = boost::json::parse(item, ec, {}, opts);
    if (ec) return Row(Status::InvalidArgument(fmt::format("not JSON: {}", ec.message())));
    if (!v.is_object()) return Row(Status::InvalidArgument("not a JSON object"));
    std::optional<int64_t> rank = IntField(v.as_object(), "rank");
    if (!rank) return Row(Status::InvalidArgument("no rank"));
    return Row(RankedItem<boost::json::value>{*rank, std::move(v)});
  };
  std::vector<boost::json::value> rows = ItemsByRank(answer.nodes, {"", "answer", "row"}, parse, missing);
  return boost::json::array(std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
}

JobLiveSource::JobLiveSource(rdzv::CoordinatorServer& server, LiveJob job) : server_(server), job_(std::move(job)) {
  server_.OnQueryAnswered([this, alive = life_.token()](const rdzv::QueryAnswered& a) {
    if (!alive.expired()) Answered(a);
  });
}

boost::json::object JobLiveSource::Header(int ranks) const {
  boost::json::array command;
  for (const std::string& a : job_.command) command.emplace_back(a);
  // The server hosts this job alone, so its count of spares is the job's.
  return boost::json::object{{"run_id", job_.run_id},
                             {"pid", static_cast<int>(getpid())},
                             {"started", job_.started},
                             {"command", std::move(command)},
                             {"ranks", ranks},
                             {"job_wide", true},
                             {"spares", server_.counters().spares}};
}

void JobLiveSource::Status(std::function<void(boost::json::object)> reply) {
  std::uint64_t tag = next_tag_++;
  waiting_[tag] = std::move(reply);
  server_.Ask(job_.run_id, tag, "status", kJobStatusTimeout);
}

void JobLiveSource::Stacks(std::function<void(boost::json::object)> reply) {
  std::uint64_t tag = next_tag_++;
  waiting_[tag] = std::move(reply);
  server_.Ask(job_.run_id, tag, "stacks", kJobStacksTimeout);
}

void JobLiveSource::Answered(const rdzv::QueryAnswered& answer) {
  auto it = waiting_.find(answer.tag);
  if (it == waiting_.end()) return;
  std::function<void(boost::json::object)> reply = std::move(it->second);
  waiting_.erase(it);
  int ranks = 0;
  for (const rdzv::NodeStacks& node : answer.nodes) ranks += node.nproc;
  boost::json::object doc = Header(ranks);
  std::vector<std::string> missing;
  if (!answer.problem.empty()) missing.push_back(fmt::format("no node was asked ({})", answer.problem));
  if (answer.what == "stacks") {
    rdzv::HangReport report;
    report.nodes = answer.nodes;
    std::vector<std::string> problems;
    boost::json::array stacks;
    for (const RankStack& s : StacksOfReport(report, problems)) stacks.push_back(ToJson(s));
    missing.insert(missing.end(), problems.begin(), problems.end());
    doc["stacks"] = std::move(stacks);
  } else {
    doc["rows"] = RowsOfAnswer(answer, missing);
  }
  boost::json::array m;
  for (const std::string& line : missing) m.emplace_back(line);
  doc["missing"] = std::move(m);
  reply(std::move(doc));
}

Result<std::string> LiveSocketPath(const envmap::EnvMap& env, const std::string& run_id) {
  std::string dir = LiveDir(env, geteuid());
  if (Status s = OpenLiveDir(dir, geteuid()); !s.ok()) return s;
  return fmt::format("{}/{}", dir, LiveSocketName(dir, run_id, static_cast<int>(getpid())));
}

std::unique_ptr<LiveServer> StartLiveView(boost::asio::io_context& io, Console& console,
                                          const Result<std::string>& path, LiveSource& source) {
  if (!path.ok()) {
    console.Say(fmt::format("{}; the job runs without 'dlaunch status'", path.status().message()));
    return nullptr;
  }
  Result<std::unique_ptr<LiveServer>> server =
      LiveServer::Start(io, *path, source, [&console](const std::string& line) { console.Say(line); });
  if (!server.ok()) {
    console.Say(fmt::format("{}; the job runs without 'dlaunch status'", server.status().message()));
    return nullptr;
  }
  return std::move(*server);
}

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", tm);
}

}  // namespace dlaunch::launcher
