// `dlaunch status` and `dlaunch stacks` (live_client.hpp). About 400 lines: the
// socket search, the one request and the table are one client's steps, read in
// order; each function stays short.
#include "launcher/commands/live_client.hpp"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/core/exit.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/text.hpp"
#include "launcher/live/live.hpp"
#include "launcher/modes/remote.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

namespace {

using Clock = std::chrono::steady_clock;

// Default: how long one status request may take (a job answers from memory).
constexpr std::chrono::seconds kStatusLimit{3};
// Default: how long a stacks request may take (gdb attaches take seconds; the job gives up at 10 s).
constexpr std::chrono::seconds kStacksLimit{40};
// Default: the largest reply taken (stacks of many ranks).
constexpr size_t kMaxReply = size_t{64} << 20;
// --watch's period.
constexpr std::chrono::seconds kWatchPeriod{1};

// One job's answer. `refused`: nothing listens there (its dlaunch was killed).
struct Answer {
  bool refused = false;
  Status status;
  boost::json::object doc;
};

// Asks the socket at `path` one request with plain blocking calls under a
// deadline: this process is a one-shot client with nothing else to serve, so it
// has no event loop (launcher/core/event_loop.hpp's rule is for processes that
// run a job).
Answer Ask(const std::string& path, std::string_view request, std::chrono::milliseconds limit) {
  Answer a;
  Clock::time_point deadline = Clock::now() + limit;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    a.status = Status::Io(fmt::format("{}: cannot make a socket ({})", path, std::strerror(errno)));
    return a;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  // A Unix socket connects at once or fails at once (EAGAIN: its backlog is full).
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    a.refused = errno == ECONNREFUSED;
    a.status = Status::Io(fmt::format("{}: cannot connect ({})", path, std::strerror(errno)));
    close(fd);
    return a;
  }
  std::string text;
  size_t sent = 0;
  char buf[65536];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      a.status = Status::Timeout(fmt::format("{}: no answer within {}s", path,
                                             std::chrono::duration_cast<std::chrono::seconds>(limit).count()));
      break;
    }
    pollfd p{fd, static_cast<short>(sent < request.size() ? POLLOUT : POLLIN), 0};
    if (poll(&p, 1, static_cast<int>(std::min<long>(left, 1000))) < 0 && errno != EINTR) break;
    if (sent < request.size()) {
      ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        a.status = Status::Io(fmt::format("{}: cannot send ({})", path, std::strerror(errno)));
        break;
      }
      if (n > 0) sent += static_cast<size_t>(n);
      continue;
    }
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) {
      a.status = Status::Io(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
      break;
    }
    if (n == 0) {
      boost::system::error_code ec;
      boost::json::parse_options opts;
      opts.max_depth = 16;
      boost::json::value v = boost::json::parse(text, ec, {}, opts);
      if (ec || !v.is_object()) {
        a.status = Status::Io(
            fmt::format("{}: {}", path, text.empty() ? "closed without an answer" : "the answer is not a JSON object"));
      } else if (const boost::json::string* e =
                     v.as_object().if_contains("error") != nullptr ? v.as_object().at("error").if_string() : nullptr) {
        a.status = Status::Io(fmt::format("{}: {}", path, SafeUtf8(std::string_view(e->data(), e->size()), false)));
      } else {
        a.doc = std::move(v.as_object());
      }
      break;
    }
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxReply) {
      a.status = Status::Io(fmt::format("{}: the answer is larger than {} MiB", path, kMaxReply >> 20));
      break;
    }
  }
  close(fd);
  return a;
}

std::string Str(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  const boost::json::string* s = v != nullptr ? v->if_string() : nullptr;
  return s != nullptr ? SafeUtf8(std::string_view(s->data(), s->size()), false) : std::string();
}

double Num(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (const int64_t* i = v->if_int64()) return static_cast<double>(*i);
  if (const uint64_t* u = v->if_uint64()) return static_cast<double>(*u);
  if (const double* d = v->if_double()) return *d;
  return 0;
}

// Cuts `line` to `width` code points (0: not cut).
std::string Cut(const std::string& line, size_t width) {
  if (width == 0) return line;
  size_t points = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xc0) == 0x80) continue;
    if (++points > width) return line.substr(0, i);
  }
  return line;
}

std::string Duration(double s) {
  auto t = static_cast<long>(s);
  if (t < 3600) return fmt::format("{}:{:02}", t / 60, t % 60);
  return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
}

std::string Size(double kib) {
  if (kib < 1024) return fmt::format("{:.0f}K", kib);
  if (kib < 1024 * 1024) return fmt::format("{:.1f}M", kib / 1024);
  return fmt::format("{:.2f}G", kib / 1024 / 1024);
}

// The terminal's width: stdout's when it is a terminal, else $COLUMNS, else 0 (not cut).
size_t Width(const envmap::EnvMap& env) {
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  auto c = env.find("COLUMNS");
  if (c != env.end()) {
    if (std::optional<int> n = ParseInt(c->second); n && *n > 0) return static_cast<size_t>(*n);
  }
  return 0;
}

// The sockets in `dir` whose names begin with `prefix`.
std::vector<std::string> Sockets(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.starts_with(prefix) && LiveSocketPid(name)) out.push_back(name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<boost::json::object> PreferJobWide(std::vector<boost::json::object> docs) {
  std::set<std::string> wide;
  std::vector<boost::json::object> out;
  for (const auto& d : docs) {
    const boost::json::value* w = d.if_contains("job_wide");
    if (w == nullptr || !w->is_bool() || !w->as_bool()) continue;
    if (wide.insert(Str(d, "run_id")).second) out.push_back(d);
  }
  for (auto& d : docs) {
    const boost::json::value* w = d.if_contains("job_wide");
    bool is_wide = w != nullptr && w->is_bool() && w->as_bool();
    if (!is_wide && !wide.count(Str(d, "run_id"))) out.push_back(std::move(d));
  }
  return out;
}

namespace {

struct Found {
  std::vector<boost::json::object> docs;  // one per dlaunch that answered
  std::vector<std::string> errors;        // sockets that would not answer
};

// Asks every socket of `run_id` (every one, when empty) in `dir`. A socket that
// refuses (its dlaunch was killed) is skipped, and removed once its pid is gone.
Found AskAll(const std::string& dir, const std::string& run_id, std::string_view request,
             std::chrono::milliseconds limit) {
  Found f;
  for (const std::string& name : Sockets(dir, run_id.empty() ? "" : LiveSocketPrefix(dir, run_id))) {
    std::string path = dir + "/" + name;
    Answer a = Ask(path, request, limit);
    if (a.refused) {
      std::optional<int> pid = LiveSocketPid(name);
      if (pid && kill(*pid, 0) != 0 && errno == ESRCH) unlink(path.c_str());
      continue;
    }
    if (!a.status.ok()) {
      if (a.status.message().find("No such file") == std::string::npos) f.errors.push_back(a.status.message());
      continue;
    }
    if (!run_id.empty() && Str(a.doc, "run_id") != run_id) continue;  // a prefix of a longer id
    f.docs.push_back(std::move(a.doc));
  }
  f.docs = PreferJobWide(std::move(f.docs));
  return f;
}

// Each node's lines that the job-wide answer left out ("missing: node 1 (b), ...").
std::string MissingLines(const std::vector<boost::json::object>& docs) {
  std::string out;
  for (const auto& d : docs)
    if (const boost::json::value* m = d.if_contains("missing"); m != nullptr && m->is_array())
      for (const boost::json::value& line : m->as_array())
        if (line.is_string()) out += "missing: " + SafeUtf8(line.as_string().c_str(), false) + "\n";
  return out;
}

// The spares a job-wide answer says wait to replace a lost node (--spares).
std::string SparesLine(const std::vector<boost::json::object>& docs) {
  for (const auto& d : docs)
    if (long spares = static_cast<long>(Num(d, "spares")); spares > 0)
      return fmt::format("spares: {} waiting to replace a lost node\n", spares);
  return "";
}

// The straggler watch's lines about the ranks it named (--straggler-window).
std::string StragglerLines(const std::vector<boost::json::object>& docs) {
  std::string out;
  for (const auto& d : docs)
    if (const boost::json::value* s = d.if_contains("stragglers"); s != nullptr && s->is_array())
      for (const boost::json::value& line : s->as_array())
        if (line.is_string()) out += SafeUtf8(line.as_string().c_str(), false) + "\n";
  return out;
}

// Where each rank's time went in the straggler watch's last window:
//   "rank 2: 5% at the synchronisation point; 41% data.py:17 load_batch, 12% ...".
std::string ProfileLines(const std::vector<boost::json::object>& docs) {
  std::string out;
  for (const auto& d : docs) {
    const boost::json::value* p = d.if_contains("profile");
    if (p == nullptr || !p->is_object()) continue;
    const boost::json::value* ranks = p->as_object().if_contains("ranks");
    if (ranks == nullptr || !ranks->is_array()) continue;
    out += fmt::format("\nwhere each rank's time went (the last {:.0f}s window):\n", Num(p->as_object(), "window_s"));
    for (const boost::json::value& r : ranks->as_array()) {
      if (!r.is_object()) continue;
      const boost::json::object& o = r.as_object();
      std::vector<std::string> frames;
      if (const boost::json::value* f = o.if_contains("frames"); f != nullptr && f->is_array())
        for (const boost::json::value& kv : f->as_array())
          if (kv.is_array() && kv.as_array().size() == 2 && kv.as_array()[0].is_string() &&
              kv.as_array()[1].is_number())
            frames.push_back(fmt::format("{:.0f}% {}", 100 * kv.as_array()[1].to_number<double>(),
                                         SafeUtf8(kv.as_array()[0].as_string().c_str(), false)));
      out += fmt::format("  rank {}: {:.0f}% at the synchronisation point; {}\n", static_cast<long>(Num(o, "rank")),
                         100 * Num(o, "sync_share"), fmt::join(frames, ", "));
    }
  }
  return out;
}

void Print(const std::string& text) { WriteAll(STDOUT_FILENO, text); }

std::string JobHeader(const std::vector<boost::json::object>& docs) {
  std::vector<std::string> pids;
  for (const auto& d : docs) pids.push_back(fmt::format("{}", static_cast<long>(Num(d, "pid"))));
  std::string command;
  if (const boost::json::value* c = docs.front().if_contains("command"); c != nullptr && c->is_array())
    for (const boost::json::value& a : c->as_array())
      if (a.is_string()) command += (command.empty() ? "" : " ") + ShellQuote(SafeUtf8(a.as_string().c_str(), false));
  return fmt::format("run {} (dlaunch pid {}), started {}: {}", Str(docs.front(), "run_id"), fmt::join(pids, ", "),
                     Str(docs.front(), "started"), command);
}

std::string StatusView(const std::vector<boost::json::object>& docs, size_t width) {
  boost::json::array rows;
  for (const auto& d : docs)
    if (const boost::json::value* r = d.if_contains("rows"); r != nullptr && r->is_array())
      for (const boost::json::value& row : r->as_array())
        if (row.is_object()) rows.push_back(row);
  std::stable_sort(rows.begin(), rows.end(), [](const boost::json::value& a, const boost::json::value& b) {
    return Num(a.as_object(), "rank") < Num(b.as_object(), "rank");
  });
  return Cut(JobHeader(docs), width) + "\n" + StatusTable(rows, width) + SparesLine(docs) + StragglerLines(docs) +
         MissingLines(docs);
}

int ShowStatus(const LivePlan& plan, const std::string& dir, const envmap::EnvMap& env) {
  std::string who = plan.run_id.empty() ? "dlaunch status" : "dlaunch status " + plan.run_id;
  bool tty = isatty(STDOUT_FILENO) != 0;
  for (int round = 0;; ++round) {
    Found f = AskAll(dir, plan.run_id, "status\n", kStatusLimit);
    size_t width = Width(env);
    if (f.docs.empty()) {
      for (const std::string& e : f.errors) WriteAll(STDERR_FILENO, fmt::format("{}: {}\n", who, e));
      if (round > 0) {
        Print(plan.run_id.empty() ? "dlaunch status: no job is running any more\n"
                                  : fmt::format("{}: the job has ended\n", who));
        return 0;
      }
      return Fail(1,
                  plan.run_id.empty() ? fmt::format("no running job of this user on this machine (looked in {})", dir)
                                      : fmt::format("no running job with this id on this machine (looked in {})", dir),
                  who);
    }
    std::string view = plan.run_id.empty() ? JobTable(f.docs, width) : StatusView(f.docs, width);
    if (!plan.watch) {
      Print(view);
      return 0;
    }
    // A terminal gets a view like top's, redrawn in place; a pipe or a file a
    // plain copy of each view, one after the other.
    Print(tty ? "\x1b[H\x1b[2J" + view : view + "\n");
    std::this_thread::sleep_for(kWatchPeriod);
  }
}

int ShowStacks(const LivePlan& plan, const std::string& dir) {
  std::string who = plan.run_id.empty() ? "dlaunch stacks" : "dlaunch stacks " + plan.run_id;
  std::string run_id = plan.run_id;
  if (run_id.empty()) {
    // With one job running, that one; with several, the user says which.
    Found all = AskAll(dir, "", "status\n", kStatusLimit);
    std::vector<std::string> ids;
    for (const auto& d : all.docs)
      if (std::find(ids.begin(), ids.end(), Str(d, "run_id")) == ids.end()) ids.push_back(Str(d, "run_id"));
    if (ids.empty())
      return Fail(1, fmt::format("no running job of this user on this machine (looked in {})", dir), who);
    if (ids.size() > 1)
      return Fail(kExitUsage, fmt::format("{} jobs are running here ({}): name one", ids.size(), fmt::join(ids, ", ")),
                  who);
    run_id = ids.front();
  }
  Found f = AskAll(dir, run_id, "stacks\n", kStacksLimit);
  for (const std::string& e : f.errors) WriteAll(STDERR_FILENO, fmt::format("{}: {}\n", who, e));
  if (f.docs.empty())
    return Fail(1, fmt::format("no running job with this id on this machine (looked in {})", dir), who);
  std::vector<RankStack> stacks;
  for (const auto& d : f.docs) {
    const boost::json::value* s = d.if_contains("stacks");
    if (s == nullptr || !s->is_array()) continue;
    for (const boost::json::value& v : s->as_array()) {
      Result<RankStack> r = RankStackFromJson(v);
      if (r.ok())
        stacks.push_back(std::move(*r));
      else
        WriteAll(STDERR_FILENO, fmt::format("{}: {}\n", who, r.status().message()));
    }
  }
  std::sort(stacks.begin(), stacks.end(), [](const RankStack& a, const RankStack& b) { return a.rank < b.rank; });
  std::string out = JobHeader(f.docs) + "\n";
  if (stacks.empty()) out += "no rank is running\n";
  for (std::string line : HangSummary(stacks)) {
    if (line.starts_with("hang: ")) line.replace(0, 6, "stacks: ");
    out += line + "\n";
  }
  out += MissingLines(f.docs);
  out += ProfileLines(f.docs);
  out += "\n" + FullStacks(stacks);
  Print(out);
  return 0;
}

}  // namespace

std::string StatusTable(const boost::json::array& rows, size_t width) {
  // A ROLE column only when the job runs several programs (or a --role).
  bool roles = false;
  for (const boost::json::value& v : rows) {
    const boost::json::value* role = v.as_object().if_contains("role");
    roles = roles || (role != nullptr && role->is_string() && role->as_string() != "default");
  }
  std::vector<std::vector<std::string>> cells = {
      {"NODE", "HOST", "RANK", "LOCAL", "PID", "STATE", "TIME", "CPU%", "RSS", "RESTARTS", "SILENT", "LAST LINE"}};
  if (roles) cells[0].insert(cells[0].begin() + 3, "ROLE");
  for (const boost::json::value& v : rows) {
    const boost::json::object& r = v.as_object();
    long pid = static_cast<long>(Num(r, "pid"));
    cells.push_back({fmt::format("{}", static_cast<long>(Num(r, "node_rank"))), Str(r, "host"),
                     fmt::format("{}", static_cast<long>(Num(r, "rank"))),
                     fmt::format("{}", static_cast<long>(Num(r, "local_rank"))), pid > 0 ? fmt::format("{}", pid) : "-",
                     Str(r, "state") + (r.if_contains("straggler") != nullptr ? ", straggler" : ""),
                     Duration(Num(r, "run_time_s")), fmt::format("{:.1f}", Num(r, "cpu_pct")),
                     pid > 0 ? Size(Num(r, "rss_kib")) : "-", fmt::format("{}", static_cast<long>(Num(r, "restarts"))),
                     fmt::format("{:.0f}s", std::floor(Num(r, "silent_s"))), Str(r, "last_line")});
    if (roles) cells.back().insert(cells.back().begin() + 3, Str(r, "role"));
  }
  std::vector<size_t> w(cells[0].size(), 0);
  for (const auto& row : cells)
    for (size_t i = 0; i + 1 < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (size_t i = 0; i + 1 < row.size(); ++i) {
      // Numbers right; host, role and state left.
      bool right = i != 1 && (roles ? i != 3 && i != 6 : i != 5);
      line += right ? fmt::format("{:>{}}  ", row[i], w[i]) : fmt::format("{:<{}}  ", row[i], w[i]);
    }
    line += row.back();
    out += Cut(line, width) + "\n";
  }
  return out;
}

std::string JobTable(const std::vector<boost::json::object>& docs, size_t width) {
  std::string out =
      Cut(fmt::format("{:<24}  {:>8}  {:>5}  {:<27}  {}", "RUN ID", "PID", "RANKS", "STARTED", "COMMAND"), width) +
      "\n";
  for (const auto& d : docs) {
    std::string command;
    if (const boost::json::value* c = d.if_contains("command"); c != nullptr && c->is_array())
      for (const boost::json::value& a : c->as_array())
        if (a.is_string()) command += (command.empty() ? "" : " ") + ShellQuote(SafeUtf8(a.as_string().c_str(), false));
    out += Cut(fmt::format("{:<24}  {:>8}  {:>5}  {:<27}  {}", Str(d, "run_id"), static_cast<long>(Num(d, "pid")),
                           static_cast<long>(Num(d, "ranks")), Str(d, "started"), command),
               width) +
           "\n";
  }
  return out;
}

int RunLiveClient(const LivePlan& plan, const envmap::EnvMap& env) {
  if (plan.help) {
    Print(LiveUsage(plan.ask == LivePlan::Ask::kStacks ? "stacks" : "status"));
    return 0;
  }
  std::string who = std::string(plan.ask == LivePlan::Ask::kStacks ? "dlaunch stacks" : "dlaunch status") +
                    (plan.run_id.empty() ? "" : " " + plan.run_id);
  std::string dir = plan.dir.empty() ? LiveDir(env, geteuid()) : plan.dir;
  // The client refuses what the server refuses: in a directory another user
  // controls, a socket could be anyone's, and its answer junk for the terminal.
  if (dlaunch::Status s = CheckLiveDir(dir, geteuid()); !s.ok()) {
    if (s.code() == Code::kNotFound)
      return Fail(1,
                  plan.run_id.empty() ? fmt::format("no running job of this user on this machine (looked in {})", dir)
                                      : fmt::format("no running job with this id on this machine (looked in {})", dir),
                  who);
    return Fail(1, s.message(), who);
  }
  return plan.ask == LivePlan::Ask::kStacks ? ShowStacks(plan, dir) : ShowStatus(plan, dir, env);
}

}  // namespace dlaunch::launcher
