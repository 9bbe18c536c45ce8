#include "launcher/modes/straggler_glue.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <fmt/format.h>

#include "launcher/core/system.hpp"
#include "launcher/jobwide/node_items.hpp"
#include "rendezvous/codec.hpp"

namespace dlaunch::launcher {

namespace rdzv = dlaunch::rendezvous;

namespace {

// The asker's own tags on the server: apart from the live view's (counted from 1).
constexpr std::uint64_t kProfileTagBit = std::uint64_t{1} << 62;

StragglerWatchOptions WatchOptions(const StragglerFlags& flags) {
  return {flags.window, StragglerOptions{flags.threshold, flags.ignore}, flags.stop, flags.file};
}

// The run's ranks that have a process now, each with the role it is compared
// in: its TensorFlow role, else the job's (torchrun's --role), as the worker's
// own variables say (envmap::LocalSlots).
std::vector<LocalRank> Running(WorkerRun& run, const envmap::JobLayout& layout) {
  std::map<int, std::string> roles;
  for (const envmap::WorkerSlot& slot : envmap::LocalSlots(layout)) roles[slot.rank] = slot.role;
  std::vector<LocalRank> out;
  for (const boost::json::value& row : run.RecordRows()) {
    const boost::json::object& o = row.as_object();
    const std::int64_t* rank = o.at("rank").if_int64();
    const std::int64_t* pid = o.at("pid").if_int64();
    if (rank == nullptr || pid == nullptr || *pid <= 0) continue;
    auto role = roles.find(static_cast<int>(*rank));
    out.push_back({static_cast<int>(*rank), static_cast<int>(*pid), role != roles.end() ? role->second : layout.role});
  }
  return out;
}

}  // namespace

NodeStraggler::NodeStraggler(const StragglerFlags& flags, std::string dumps_dir, Console& console, Timers& timers)
    : native_(flags.enabled() && flags.native ? std::make_unique<NativeSampler>("/proc", kSamplePeriod) : nullptr),
      timers_(timers),
      windows_(
          std::move(dumps_dir), [this](int pid) { return native_ ? native_->Samples(pid) : std::nullopt; },
          [&console](const std::string& line) { console.Say(line); }) {
  if (!native_) return;
  native_timer_ = timers.NewTimer();
  LookNatively();
}

NodeStraggler::~NodeStraggler() = default;

void NodeStraggler::SetRun(WorkerRun* run, const envmap::JobLayout* layout) {
  run_ = run;
  layout_ = layout;
}

// One look at every running rank. Cheap (bench/results.md: a few
// microseconds a thread), and only with --straggler-native.
void NodeStraggler::LookNatively() {
  std::set<int> running;
  if (run_ != nullptr && layout_ != nullptr)
    for (const LocalRank& r : Running(*run_, *layout_)) running.insert(r.pid);
  for (int pid : watched_)
    if (!running.count(pid)) native_->Forget(pid);
  for (int pid : running)
    if (!watched_.count(pid)) native_->Watch(pid);
  watched_ = std::move(running);
  native_->Tick(timers_.Now());
  native_timer_->At(timers_.Now() + kSamplePeriod, [this] { LookNatively(); });
}

std::vector<RankWindow> NodeStraggler::Take(WorkerRun& run, const envmap::JobLayout& layout) {
  const envmap::Node& me = layout.nodes.at(static_cast<size_t>(layout.node_rank));
  return windows_.Take(Running(run, layout), layout.node_rank, me.host);
}

std::vector<std::string> NodeStraggler::Items(WorkerRun& run, const envmap::JobLayout& layout) {
  std::vector<std::string> items;
  for (const RankWindow& w : Take(run, layout))
    if (std::string item = WindowItem(w, rdzv::kMaxString); !item.empty()) items.push_back(std::move(item));
  return items;
}

std::unique_ptr<StragglerWatch> LocalStragglerWatch(const StragglerFlags& flags, Timers& timers, EventLog& events,
                                                    Console& console, NodeStraggler& node,
                                                    std::function<WorkerRun*()> run, const envmap::JobLayout& layout) {
  if (!flags.enabled()) return nullptr;
  auto gather = [&node, run, &layout](std::function<void(std::vector<RankWindow>)> done) {
    WorkerRun* r = run();
    done(r == nullptr ? std::vector<RankWindow>{} : node.Take(*r, layout));
  };
  StragglerWatch::Hooks hooks{[&console](const std::string& line) { console.Say(line); },
                              [run](int code, const std::string& cause) {
                                if (WorkerRun* r = run()) r->Abort(code, cause);
                              }};
  return std::make_unique<StragglerWatch>(timers, events, WatchOptions(flags), std::move(gather), std::move(hooks));
}

namespace {

// The windows of an answered "profile" question, each rank's node as the
// coordinator knows it (not as the node says).
std::vector<RankWindow> WindowsOfAnswer(const rdzv::QueryAnswered& answer,
                                        std::function<void(const std::string&)> say) {
  std::function<Result<RankedItem<RankWindow>>(const std::string&)> parse = [](const std::string& item) {
    Result<RankWindow> w = WindowFromItem(item);
    if (!w.ok()) return Result<RankedItem<RankWindow>>(w.status());
    return Result<RankedItem<RankWindow>>(RankedItem<RankWindow>{w->rank, std::move(*w)});
  };
  std::vector<std::string> problems;
  std::vector<RankWindow> windows = ItemsByRank(answer.nodes, {"", "answer", "window"}, parse, problems);
  for (RankWindow& w : windows) {
    for (const rdzv::NodeStacks& n : answer.nodes) {
      if (w.rank < n.first_rank || w.rank >= n.first_rank + n.nproc) continue;
      w.node_rank = n.node_rank;
      w.host = n.host;
    }
  }
  // A node that does not answer in time is left out of this window, silently:
  // a lost node is said elsewhere. Items a node sends wrong are said.
  for (const std::string& p : problems)
    if (p.find("no answer") == std::string::npos) say("straggler: " + p);
  return windows;
}

}  // namespace

std::unique_ptr<StragglerWatch> JobStragglerWatch(const StragglerFlags& flags, Timers& timers, EventLog& events,
                                                  Console& console, rdzv::CoordinatorServer& server,
                                                  const std::string& run_id) {
  if (!flags.enabled()) return nullptr;
  struct Asker {
    std::uint64_t next = 0;
    std::map<std::uint64_t, std::function<void(std::vector<RankWindow>)>> waiting;
    // A node that sends junk every window is said once per kind of junk, not
    // once a window: the lines said so far (bounded).
    std::set<std::string> said;
  };
  auto asker = std::make_shared<Asker>();
  server.OnQueryAnswered([asker, &console](const rdzv::QueryAnswered& answer) {
    auto it = asker->waiting.find(answer.tag);
    if (it == asker->waiting.end()) return;
    auto done = std::move(it->second);
    asker->waiting.erase(it);
    done(WindowsOfAnswer(answer, [&](const std::string& line) {
      if (asker->said.size() < 64 && asker->said.insert(line).second) console.Say(line);
    }));
  });
  // Each node answers from files it has: a second is plenty, and under a window.
  auto timeout = std::min<std::chrono::milliseconds>(flags.window / 2, std::chrono::seconds(5));
  auto gather = [asker, &server, run_id, timeout](std::function<void(std::vector<RankWindow>)> done) {
    std::uint64_t tag = kProfileTagBit | ++asker->next;
    asker->waiting[tag] = std::move(done);
    server.Ask(run_id, tag, std::string(kProfileQuery), timeout);
  };
  StragglerWatch::Hooks hooks{[&console](const std::string& line) { console.Say(line); },
                              [&server](int code, const std::string& cause) { server.AbortAll(code, cause); }};
  return std::make_unique<StragglerWatch>(timers, events, WatchOptions(flags), std::move(gather), std::move(hooks));
}

}  // namespace dlaunch::launcher
