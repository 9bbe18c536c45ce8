#include "launcher/process/worker_group.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <optional>

#include <boost/json/object.hpp>
#include <fmt/format.h>

#include "launcher/core/private_dir.hpp"
#include "launcher/core/text.hpp"
#include "launcher/watchdog/job_mark.hpp"
#include "launcher/stacks/python_hook.hpp"
#include "launcher/process/progress_files.hpp"
#include "launcher/process/summary.hpp"

namespace dlaunch::launcher {
namespace {

// Default: bytes per read of one worker pipe.
constexpr size_t kWorkerReadSize = size_t{1} << 18;

}  // namespace

WorkerGroup::WorkerGroup(const RunPlan& plan, std::string job_mark, ProcessControl& processes,
                         boost::asio::io_context& io, Console& console, Hooks hooks,
                         std::function<Clock::time_point()> now)
    : plan_(plan),
      job_mark_(std::move(job_mark)),
      processes_(processes),
      hooks_(std::move(hooks)),
      now_(std::move(now)),
      last_output_(now_()),
      streams_(io, console, kWorkerReadSize, now_),
      supervisor_(*this, NodeDomains(plan.supervisor, plan.programs, envmap::LocalSlots(plan.layout))),
      slots_(envmap::ProgramSlots(plan.layout, plan.programs)),
      gpu_places_(plan.programs.empty() ? std::vector<int>{} : envmap::PlacesOnNode(slots_, plan.programs)),
      tails_(slots_.size()),
      lasts_(slots_.size()) {}

Status WorkerGroup::Start() {
  processes_.StartReaping(
      [this](int pid, ExitStatus status) {
        Exited(pid, status);
        supervisor_.OnExit(pid, status, now_());
      },
      [this] { Changed(); });
  Status s = supervisor_.Start(now_());
  last_output_ = now_();
  return s;
}

void WorkerGroup::Close() {
  processes_.StopReaping();
  streams_.CloseAll();
}

bool WorkerGroup::Ended() {
  if (!supervisor_.done()) return false;
  if (streams_.open(0) == 0) return true;
  streams_.Drain(0);
  return false;
}

int WorkerGroup::ToldLocalRank(int local_rank) const {
  return envmap::ShapeOf(plan_.layout, slots_[static_cast<size_t>(local_rank)]).local_rank;
}

const WorkerRecord* WorkerGroup::worker(size_t local_rank) const {
  const WorkerRecord* w = nullptr;
  for (const WorkerRecord& r : supervisor_.workers())
    if (static_cast<size_t>(r.local_rank) == local_rank) w = &r;
  return w;
}

const LastLine* WorkerGroup::last_line(size_t local_rank) const {
  const LastLine* last = nullptr;
  for (const LastLine& l : lasts_[local_rank])
    if (l.at() && (last == nullptr || *l.at() > *last->at())) last = &l;
  return last;
}

bool WorkerGroup::held(size_t local_rank) const {
  return streams_.held(0, &lasts_[local_rank][0]) || streams_.held(0, &lasts_[local_rank][1]);
}

void WorkerGroup::SampleBeforeKill(const std::vector<int>& pids) {
  if (hooks_.sample) hooks_.sample(pids);
}

std::vector<std::int64_t> WorkerGroup::Progress() {
  if (plan_.progress == nullptr) return {};
  return plan_.progress->Read();
}

// The logs' directory, each level made 0700 or accepted only as ours: under a
// shared --log-dir another user must not have planted it (private_dir.hpp).
Status WorkerGroup::LogDir(int local_rank, int restart, std::string* dir) const {
  *dir = fmt::format("{}/attempt_{}", plan_.work_dir, restart);
  if (!plan_.write_logs) return Status::Ok();
  Status made = EnsureOwnDir(*dir);
  *dir += fmt::format("/{}", local_rank);
  if (made.ok()) made = EnsureOwnDir(*dir);
  return made;
}

SpawnSpec WorkerGroup::Spec(int local_rank, int restart) const {
  const envmap::WorkerSlot& slot = slots_[static_cast<size_t>(local_rank)];
  // The generation's restart count, plus local restarts. A copy only then: the
  // layout holds a row for every node of the job.
  std::optional<envmap::JobLayout> restarted;
  if (restart != 0) {
    restarted = plan_.layout;
    restarted->restart_count += restart;
  }
  const envmap::JobLayout& layout = restarted ? *restarted : plan_.layout;
  envmap::Flavors flavors = plan_.flavors;
  flavors.error_file = ErrorFilePath(plan_.private_dir, restart, local_rank);
  std::error_code ec;
  std::filesystem::remove(flavors.error_file, ec);
  // A fresh file for each generation: the job's restart count, not the local one.
  if (plan_.progress != nullptr) flavors.progress_file = plan_.progress->Prepare(layout.restart_count, local_rank);

  // Several programs: this rank's group says what it runs, in which world.
  const envmap::ProgramTable& programs = plan_.programs;
  const envmap::ProgramGroup* group =
      programs.empty() ? nullptr
                       : &programs.groups[static_cast<size_t>(programs.group_of[static_cast<size_t>(slot.rank)])];
  envmap::EnvMap env = plan_.inherited;
  for (auto& [k, v] : group ? envmap::ProgramEnv(layout, slot, programs, flavors, plan_.inherited)
                            : envmap::WorkerEnv(layout, slot, flavors, plan_.inherited))
    env[k] = v;
  if (plan_.python_hook) AddPythonHook(env, plan_.hook_dir, plan_.private_dir);
  // Every descendant inherits it: the watchdog's way to find them all (job_mark.hpp).
  if (!job_mark_.empty()) env[std::string(kJobMarkVar)] = job_mark_;
  // --virtual-local-rank has set CUDA_VISIBLE_DEVICES already, to the same GPU.
  // A group's own --gpus: its workers on this node take them in turn.
  if (group != nullptr && !group->gpus.empty())
    env["CUDA_VISIBLE_DEVICES"] =
        group->gpus[static_cast<size_t>(gpu_places_[static_cast<size_t>(local_rank)]) % group->gpus.size()];
  else if (plan_.pin_gpu && !plan_.gpus.empty() && !flavors.virtual_local_rank)
    env["CUDA_VISIBLE_DEVICES"] =
        plan_.gpus[static_cast<size_t>(envmap::ShapeOf(layout, slot).local_rank) % plan_.gpus.size()];

  SpawnSpec spec;
  spec.exe = group ? group->exe : plan_.exe;
  std::vector<std::string> argv = group ? envmap::ArgvOf(programs, slot.rank) : std::vector<std::string>{};
  const std::vector<std::string>& args = group ? argv : plan_.argv;
  spec.args.assign(args.begin() + 1, args.end());
  std::vector<std::string> rank_arg = envmap::LocalRankArgs(layout, slot, flavors.local_rank_arg);
  size_t rank_arg_at = group ? group->local_rank_arg_at : plan_.local_rank_arg_at;
  size_t at = rank_arg_at > 0 ? std::min(rank_arg_at - 1, spec.args.size()) : spec.args.size();
  spec.args.insert(spec.args.begin() + static_cast<std::ptrdiff_t>(at), rank_arg.begin(), rank_arg.end());
  spec.env.reserve(env.size());
  for (auto& [k, v] : env) spec.env.push_back(k + "=" + v);
  if (!plan_.cpus.empty()) spec.cpus = plan_.cpus[static_cast<size_t>(local_rank)];
  return spec;
}

const envmap::ProgramGroup* WorkerGroup::RestartedAlone(int local_rank) const {
  const envmap::ProgramTable& programs = plan_.programs;
  if (programs.empty()) return nullptr;
  int rank = slots_[static_cast<size_t>(local_rank)].rank;
  const envmap::ProgramGroup& g = programs.groups[static_cast<size_t>(programs.group_of[static_cast<size_t>(rank)])];
  return g.restarts >= 0 ? &g : nullptr;
}

Result<int> WorkerGroup::Start(int local_rank, int restart) {
  std::string dir;
  if (Status made = LogDir(local_rank, restart, &dir); !made.ok()) return made;
  // A role restarted alone keeps its own count; what lives as long as one
  // generation of the job (the Horovod store) is the job's.
  const envmap::ProgramGroup* alone = RestartedAlone(local_rank);
  if (alone == nullptr && restart > restarts_seen_ && plan_.restarting)
    plan_.restarting(restart);  // before its first worker
  Result<PipedChild> child = processes_.Spawn(Spec(local_rank, restart));
  if (!child.ok()) return child.status();
  Started(child->pid, local_rank, restart);
  Status s = AddStream(child->stdout_fd, local_rank, false, dir);
  if (s.ok())
    s = AddStream(child->stderr_fd, local_rank, true, dir);
  else
    close(child->stderr_fd);
  if (!s.ok()) {
    // The supervisor never learns this pid, so it must not outlive the failure.
    processes_.Signal(child->pid, SIGKILL);
    processes_.Release(child->pid);
    return s;
  }
  return child->pid;
}

void WorkerGroup::Started(int pid, int local_rank, int restart) {
  const envmap::WorkerSlot& slot = slots_[static_cast<size_t>(local_rank)];
  const envmap::ProgramGroup* alone = RestartedAlone(local_rank);
  int& seen = alone != nullptr ? role_restarts_seen_[alone->role] : restarts_seen_;
  if (restart > seen) {
    seen = restart;
    if (alone != nullptr) {
      plan_.events->Emit("restart", {{"restart", restart}, {"max_restarts", alone->restarts}, {"role", alone->role}});
    } else {
      last_output_ = now_();  // a new generation: its silence counts from its start
      plan_.events->Emit("restart", {{"restart", restart}, {"max_restarts", plan_.supervisor.max_restarts}});
    }
  }
  running_[pid] = Running{local_rank, restart, now_()};
  // The job's restart count, as TORCHELASTIC_RESTART_COUNT says it: in a
  // rendezvous each generation's group starts its own count at 0.
  plan_.events->Emit("worker_started", {{"rank", slot.rank},
                                        {"local_rank", local_rank},
                                        {"pid", pid},
                                        {"restart", plan_.layout.restart_count + restart},
                                        {"role", slot.role}});
}

Status WorkerGroup::AddStream(int fd, int local_rank, bool is_err, const std::string& dir) {
  StreamRoute r;
  const envmap::WorkerSlot& slot = slots_[static_cast<size_t>(local_rank)];
  r.fields = TagFields{slot.rank,
                       local_rank,
                       plan_.layout.node_rank,
                       slot.role,
                       is_err ? "stderr" : "stdout",
                       plan_.layout.nodes[static_cast<size_t>(plan_.layout.node_rank)].host};
  if (plan_.tag_format) {
    Result<std::string> prefix = RenderTag(*plan_.tag_format, r.fields, std::time(nullptr));
    if (!prefix.ok()) {
      close(fd);
      return prefix.status();
    }
    r.prefix = *prefix;
    if (plan_.tag_format->find("{time}") != std::string::npos) r.format = *plan_.tag_format;
  }
  int bit = is_err ? 2 : 1;
  bool redirected = static_cast<size_t>(local_rank) < plan_.redirected.size() &&
                    (plan_.redirected[static_cast<size_t>(local_rank)] & bit) != 0;
  bool shown = plan_.console_ranks.empty() || std::find(plan_.console_ranks.begin(), plan_.console_ranks.end(),
                                                        local_rank) != plan_.console_ranks.end();
  if (!redirected && shown) r.console = is_err ? ConsoleStream::kErr : ConsoleStream::kOut;
  if (plan_.write_logs) {
    Result<int> file = OpenToWrite(fmt::format("{}/{}.log", dir, is_err ? "stderr" : "stdout"), false);
    if (!file.ok()) {
      close(fd);
      return file.status();
    }
    r.file_fd = *file;
  }
  if (is_err) r.tail = &tails_[static_cast<size_t>(local_rank)];
  r.last = &lasts_[static_cast<size_t>(local_rank)][is_err ? 1 : 0];
  r.progress = &last_output_;
  streams_.Add(fd, 0, std::move(r), [this] { Changed(); });
  return Status::Ok();
}

void WorkerGroup::Exited(int pid, const ExitStatus& status) {
  auto it = running_.find(pid);
  if (it == running_.end()) return;
  const Running r = it->second;
  running_.erase(it);
  boost::json::object e{
      {"rank", RankOf(r.local_rank)},
      {"local_rank", r.local_rank},
      {"pid", pid},
      {"restart", plan_.layout.restart_count + r.restart},
      {"run_time_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now_() - r.since).count()}};
  if (status.signal != 0)
    e["signal"] = SignalName(status.signal);
  else
    e["exit_code"] = status.code;
  plan_.events->Emit("worker_exited", std::move(e));
}

}  // namespace dlaunch::launcher
