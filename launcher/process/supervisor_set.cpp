#include "launcher/process/supervisor_set.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

#include <fmt/format.h>

namespace dlaunch::launcher {

// A domain's view of the node: its Supervisor counts workers 0..n-1, the node
// knows them by local rank. Notices of a role domain name the role.
class SupervisorSet::Control : public WorkerControl {
 public:
  Control(WorkerControl& node, const SupervisorDomain& domain, bool others)
      : node_(node), domain_(domain), others_(others) {}

  Result<int> Start(int index, int restart) override {
    // A role's own restart: the first worker of its next generation.
    if (index == 0 && restart > 0 && !domain_.role.empty()) {
      size_t n = domain_.local_ranks.size();
      Notice(fmt::format("restarting its {} (restart {} of {}){}", n == 1 ? "worker" : fmt::format("{} workers", n),
                         restart, domain_.options.max_restarts, others_ ? "; the other roles run on" : ""));
    }
    return node_.Start(LocalRank(index), restart);
  }
  void Signal(int pid, int sig) override { node_.Signal(pid, sig); }
  void Release(int pid) override { node_.Release(pid); }
  void SampleBeforeKill(const std::vector<int>& pids) override { node_.SampleBeforeKill(pids); }
  std::vector<std::int64_t> Progress() override {
    std::vector<std::int64_t> all = node_.Progress();
    if (all.empty()) return all;
    std::vector<std::int64_t> mine;
    mine.reserve(domain_.local_ranks.size());
    for (int r : domain_.local_ranks)
      mine.push_back(static_cast<size_t>(r) < all.size() ? all[static_cast<size_t>(r)] : -1);
    return mine;
  }
  void Notice(const std::string& line) override {
    node_.Notice(domain_.role.empty() ? line : fmt::format("role {}: {}", domain_.role, line));
  }

 private:
  int LocalRank(int index) const { return domain_.local_ranks[static_cast<size_t>(index)]; }

  WorkerControl& node_;
  const SupervisorDomain& domain_;
  bool others_;  // other domains run beside this one
};

std::vector<SupervisorDomain> NodeDomains(const SupervisorOptions& job, const envmap::ProgramTable& programs,
                                          const std::vector<envmap::WorkerSlot>& slots) {
  auto own_group = [&](const envmap::WorkerSlot& slot) {
    if (slot.rank < 0 || static_cast<size_t>(slot.rank) >= programs.group_of.size()) return -1;
    int g = programs.group_of[static_cast<size_t>(slot.rank)];
    if (g < 0 || static_cast<size_t>(g) >= programs.groups.size()) return -1;
    return programs.groups[static_cast<size_t>(g)].restarts >= 0 ? g : -1;
  };
  SupervisorDomain main{{}, {}, job};
  std::vector<SupervisorDomain> roles(programs.groups.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    int g = own_group(slots[i]);
    (g < 0 ? main : roles[static_cast<size_t>(g)]).local_ranks.push_back(static_cast<int>(i));
  }
  std::vector<SupervisorDomain> out;
  if (main.local_ranks.size() == slots.size()) {
    // No role restarts alone here: today's one supervisor, its options as given.
    main.local_ranks.clear();
    for (int i = 0; i < job.nproc; ++i) main.local_ranks.push_back(i);
    out.push_back(std::move(main));
    return out;
  }
  if (!main.local_ranks.empty()) {
    main.options.nproc = static_cast<int>(main.local_ranks.size());
    out.push_back(std::move(main));
  }
  for (size_t g = 0; g < roles.size(); ++g) {
    if (roles[g].local_ranks.empty()) continue;
    roles[g].role = programs.groups[g].role;
    roles[g].options = job;
    roles[g].options.nproc = static_cast<int>(roles[g].local_ranks.size());
    roles[g].options.max_restarts = programs.groups[g].restarts;
    out.push_back(std::move(roles[g]));
  }
  return out;
}

SupervisorSet::SupervisorSet(WorkerControl& control, std::vector<SupervisorDomain> domains)
    : domains_(std::move(domains)), control_(control) {
  assert(!domains_.empty());
  for (size_t d = 0; d < domains_.size(); ++d) {
    if (domains_[d].role.empty() && main_ < 0) main_ = static_cast<int>(d);
    controls_.push_back(std::make_unique<Control>(control_, domains_[d], domains_.size() > 1));
    supervisors_.push_back(std::make_unique<Supervisor>(*controls_[d], domains_[d].options));
  }
#ifndef NDEBUG
  std::vector<int> all;
  for (const SupervisorDomain& d : domains_) all.insert(all.end(), d.local_ranks.begin(), d.local_ranks.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) assert(all[i] == static_cast<int>(i));
#endif
  if (domains_.size() == 1) {
    const std::vector<int>& ranks = domains_[0].local_ranks;
    direct_ = true;
    for (size_t i = 0; i < ranks.size(); ++i) direct_ = direct_ && ranks[i] == static_cast<int>(i);
  }
}

SupervisorSet::~SupervisorSet() = default;

Status SupervisorSet::Start(Clock::time_point now) {
  for (size_t d = 0; d < supervisors_.size(); ++d) {
    Status s = supervisors_[d]->Start(now);
    if (s.ok()) continue;
    // The job cannot run as asked: what started stops, the rest never starts
    // (Abort ends a domain that has not started).
    failed_ = static_cast<int>(d);
    AbortOthers(d, now);
    return s;
  }
  return Status::Ok();
}

void SupervisorSet::OnExit(int pid, ExitStatus status, Clock::time_point now) {
  for (auto& s : supervisors_) s->OnExit(pid, status, now);
  Settle(now);
}

void SupervisorSet::OnStopSignal(int sig, Clock::time_point now) {
  from_outside_ = true;
  for (auto& s : supervisors_) s->OnStopSignal(sig, now);
}

void SupervisorSet::Forward(int sig) {
  for (auto& s : supervisors_) s->Forward(sig);
}

void SupervisorSet::Abort(int code, Clock::time_point now) {
  from_outside_ = true;
  for (auto& s : supervisors_) s->Abort(code, now);
}

void SupervisorSet::OnTick(Clock::time_point now) {
  for (auto& s : supervisors_) s->OnTick(now);
  Settle(now);
}

void SupervisorSet::OnSampled(Clock::time_point now) {
  for (auto& s : supervisors_) s->OnSampled(now);
  Settle(now);
}

// After each event: the first domain that fails for good ends the job. Checked
// after every event, so it is the first in time. A failure with no restart left
// aborts the others at once, as one Supervisor stops every worker at the first
// failure (or a start that failed, mid-restart too); a failure the policy may
// still restart from (a no-progress verdict) counts once its workers have
// exited and the domain is done.
void SupervisorSet::Settle(Clock::time_point now) {
  if (failed_ >= 0 || from_outside_) return;
  for (size_t d = 0; d < supervisors_.size(); ++d) {
    const Supervisor& s = *supervisors_[d];
    // A restart whose program could not start is as final: nothing restarts it.
    bool last =
        s.state() == State::kStopping &&
        (s.start_failed() || (s.root_cause() != nullptr && s.restart_count() >= domains_[d].options.max_restarts));
    if (!last && !(s.done() && s.exit_code() != 0)) continue;
    failed_ = static_cast<int>(d);
    bool others = std::any_of(supervisors_.begin(), supervisors_.end(),
                              [&](auto& o) { return o != supervisors_[d] && !o->done(); });
    if (others && !domains_[d].role.empty())
      control_.Notice(
          fmt::format("role {}: failed with exit code {}; stopping the other roles", domains_[d].role, s.exit_code()));
    AbortOthers(d, now);
    return;
  }
}

void SupervisorSet::AbortOthers(size_t failed, Clock::time_point now) {
  int code = supervisors_[failed]->exit_code();
  for (size_t d = 0; d < supervisors_.size(); ++d)
    if (d != failed) supervisors_[d]->Abort(code, now);
}

std::optional<Clock::time_point> SupervisorSet::deadline() const {
  std::optional<Clock::time_point> first;
  for (auto& s : supervisors_)
    if (std::optional<Clock::time_point> d = s->deadline(); d && (!first || *d < *first)) first = d;
  return first;
}

SupervisorSet::State SupervisorSet::state() const {
  auto any = [&](State st) {
    return std::any_of(supervisors_.begin(), supervisors_.end(), [st](auto& s) { return s->state() == st; });
  };
  if (any(State::kRunning)) return State::kRunning;
  if (done()) return State::kDone;
  for (State st : {State::kStopping, State::kWaiting, State::kIdle})
    if (any(st)) return st;
  return State::kDone;
}

bool SupervisorSet::done() const {
  return std::all_of(supervisors_.begin(), supervisors_.end(), [](auto& s) { return s->done(); });
}

int SupervisorSet::exit_code() const {
  if (failed_ >= 0) return supervisors_[static_cast<size_t>(failed_)]->exit_code();
  for (auto& s : supervisors_)
    if (s->exit_code() != 0) return s->exit_code();
  return 0;
}

int SupervisorSet::restart_count() const {
  return main_ >= 0 ? supervisors_[static_cast<size_t>(main_)]->restart_count() : 0;
}

int SupervisorSet::stop_signal() const {
  for (auto& s : supervisors_)
    if (s->stop_signal() != 0) return s->stop_signal();
  return 0;
}

const WorkerRecord* SupervisorSet::root_cause() const {
  int d = failed_ >= 0 ? failed_ : main_;
  if (d < 0) return nullptr;
  const Supervisor& s = *supervisors_[static_cast<size_t>(d)];
  const WorkerRecord* root = s.root_cause();
  if (root == nullptr || direct_) return root;
  size_t index = static_cast<size_t>(root - s.workers().data());
  return &Merged()[static_cast<size_t>(domains_[static_cast<size_t>(d)].local_ranks[index])];
}

const std::vector<WorkerRecord>& SupervisorSet::workers() const {
  return direct_ ? supervisors_[0]->workers() : Merged();
}

// Rebuilt at each call, in place (the size stays), so that a record is never
// older than the domain's own.
const std::vector<WorkerRecord>& SupervisorSet::Merged() const {
  bool started = std::any_of(supervisors_.begin(), supervisors_.end(), [](auto& s) { return !s->workers().empty(); });
  size_t n = 0;
  for (const SupervisorDomain& d : domains_) n += d.local_ranks.size();
  merged_.resize(started ? n : 0);
  if (!started) return merged_;
  for (size_t d = 0; d < domains_.size(); ++d) {
    const std::vector<WorkerRecord>& mine = supervisors_[d]->workers();
    const std::vector<int>& ranks = domains_[d].local_ranks;
    for (size_t i = 0; i < ranks.size(); ++i) {
      // A domain not started (a start elsewhere failed) shows its workers as never run.
      WorkerRecord r = i < mine.size() ? mine[i] : WorkerRecord{};
      r.local_rank = ranks[i];
      merged_[static_cast<size_t>(ranks[i])] = r;
    }
  }
  return merged_;
}

}  // namespace dlaunch::launcher
