#include "launcher/jobwide/job_hang.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include "launcher/core/exit.hpp"
#include "launcher/core/private_dir.hpp"
#include "rendezvous/codec.hpp"

namespace dlaunch::launcher {
namespace {

namespace rdzv = dlaunch::rendezvous;

// Bytes of a Report frame besides its items: the header, id, node rank and count.
constexpr std::size_t kReportOverhead = rdzv::kHeaderSize + 12;

std::string Serialize(const RankStack& s) { return boost::json::serialize(ToJson(s)); }

std::string RenderThreads(const RankStack& s) {
  std::string out;
  for (const ThreadStack& t : s.threads) {
    out += fmt::format("{}{}:\n", t.name, t.main ? " (main)" : "");
    for (const Frame& f : t.frames) out += "  " + f.Render() + "\n";
  }
  return out;
}

// One rank's item within `budget` bytes, cut as StackItems says.
std::string FitItem(RankStack s, std::size_t budget) {
  std::string out = Serialize(s);
  if (out.size() <= budget) return out;
  s.raw = std::string(kCutNote) + "\n";
  if (out = Serialize(s); out.size() <= budget) return out;
  if (!s.threads.empty()) {
    const ThreadStack* main = s.Main();
    ThreadStack keep = main != nullptr ? *main : s.threads.front();
    s.threads = {std::move(keep)};
    if (out = Serialize(s); out.size() <= budget) return out;
    // The innermost frames say where it waits: keep as many as fit.
    std::vector<Frame> all = s.threads.front().frames;
    std::size_t lo = 0, hi = all.size();
    while (lo < hi) {
      std::size_t mid = (lo + hi + 1) / 2;
      s.threads.front().frames.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(mid));
      if (Serialize(s).size() <= budget)
        lo = mid;
      else
        hi = mid - 1;
    }
    if (lo > 0) {
      s.threads.front().frames.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(lo));
      return Serialize(s);
    }
  }
  RankStack bare;
  bare.rank = s.rank;
  bare.pid = s.pid;
  bare.how = s.how.substr(0, 64);
  bare.error = fmt::format("its stack does not fit the rendezvous report ({} bytes a rank)", budget);
  return Serialize(bare);  // may still be over a tiny budget: AgentMachine::Answer leaves it out
}

}  // namespace

std::vector<std::string> StackItems(const std::vector<RankStack>& stacks) {
  std::vector<std::string> items;
  if (stacks.empty()) return items;
  std::size_t share = (rdzv::kMaxPayload - kReportOverhead) / stacks.size();
  std::size_t budget = std::min<std::size_t>(rdzv::kMaxString, share > 4 ? share - 4 : 0);
  for (const RankStack& s : stacks) items.push_back(FitItem(s, budget));
  return items;
}

std::vector<RankStack> StacksOfReport(const rdzv::HangReport& report, std::vector<std::string>& problems) {
  std::function<Result<RankedItem<RankStack>>(const std::string&)> parse = [](const std::string& item) {
    // An item is at most kMaxString bytes (the codec's cap); the parser's own
    // depth limit bounds the rest.
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(item, ec);
    if (ec) return Result<RankedItem<RankStack>>(Status::InvalidArgument(fmt::format("not JSON: {}", ec.message())));
    Result<RankStack> s = RankStackFromJson(v);
    if (!s.ok()) return Result<RankedItem<RankStack>>(s.status());
    if (s->raw.empty() || s->raw.starts_with(kCutNote)) s->raw += RenderThreads(*s);
    int64_t rank = s->rank;
    return Result<RankedItem<RankStack>>(RankedItem<RankStack>{rank, std::move(*s)});
  };
  return ItemsByRank(report.nodes, {"not sampled", "report", "stack"}, parse, problems);
}

Result<PrivateDir> NewStacksDir() {
  const char* tmp = std::getenv("TMPDIR");
  return MakePrivateDir(tmp != nullptr ? tmp : "");
}

std::function<Result<std::string>()> KeptStacksDir(std::function<void(const std::string&)> say) {
  auto made = std::make_shared<std::string>();
  return [made, say = std::move(say)]() -> Result<std::string> {
    if (made->empty()) {
      Result<PrivateDir> dir = NewStacksDir();
      if (!dir.ok()) return dir.status();
      if (!dir->note.empty()) say(dir->note);
      *made = dir->path;
    }
    return *made;
  };
}

JobHangReporter::JobHangReporter(std::function<void(const std::string&)> say, EventLog* events,
                                 std::function<Result<std::string>()> dir)
    : say_(std::move(say)), events_(events), dir_(std::move(dir)) {}

void JobHangReporter::Suspected(const rdzv::HangSuspected& suspected) {
  say_(fmt::format("no rank has made progress for {}s: collecting stacks",
                   std::chrono::duration_cast<std::chrono::seconds>(suspected.silent).count()));
}

void JobHangReporter::Report(const rdzv::HangReport& report) {
  std::vector<std::string> problems;
  std::vector<RankStack> stacks = StacksOfReport(report, problems);
  std::vector<std::string> lines = HangSummary(stacks);
  for (const std::string& p : problems) lines.push_back("hang: " + p);
  std::string file;
  Result<std::string> dir = dir_();
  if (!dir.ok()) {
    lines.push_back(fmt::format("hang: the full stacks are not kept ({})", dir.status().message()));
  } else {
    // The next free stacks-N.txt, made exclusively, so that a run directory's
    // other stacks stay and nothing planted there is written through.
    std::string text = FullStacks(stacks);
    for (const std::string& p : problems) text += "=== " + p + "\n";
    Result<std::string> path = WriteNumberedFile(*dir, "stacks", ".txt", text);
    if (path.ok()) file = *path;
    lines.push_back(path.ok() ? fmt::format("hang: full stacks in {}", *path) : "hang: " + path.status().message());
  }
  for (const std::string& line : lines) say_(line);
  auto silent = std::chrono::duration_cast<std::chrono::seconds>(report.silent).count();
  if (events_ != nullptr) {
    boost::json::array suspects;
    for (int r : OddRanks(stacks)) suspects.emplace_back(r);
    events_->Emit("hang_suspected", {{"silent_for_s", silent}, {"suspects", std::move(suspects)}});
    if (!file.empty()) events_->Emit("stacks", {{"file", file}});
  }
  if (report.stop) {
    stop_summary_ = lines;
    if (events_ != nullptr)
      events_->SetRootCause(
          fmt::format("hang: no rank on any node made progress for {}s (--hang-action stop)", silent));
  }
}

std::vector<std::string> JobHangReporter::StopLines(const std::string& cause) const {
  if (stop_summary_.empty()) return {};
  std::vector<std::string> lines = {fmt::format("job stopped after a hang; exit code {}", kExitHang),
                                    "root cause: " + cause};
  for (const std::string& line : stop_summary_) lines.push_back("  | " + line);
  return lines;
}

}  // namespace dlaunch::launcher
