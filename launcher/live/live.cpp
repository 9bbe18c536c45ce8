#include "launcher/live/live.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <boost/asio/buffers_iterator.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include "launcher/core/private_dir.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

namespace {

// The usable length of sockaddr_un::sun_path, with its terminating NUL.
constexpr size_t kSunPath = sizeof(sockaddr_un{}.sun_path) - 1;

bool OwnDirectory(const std::string& path, uid_t uid) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid;
}

}  // namespace

std::string LiveDir(const envmap::EnvMap& env, uid_t uid) {
  auto xdg = env.find("XDG_RUNTIME_DIR");
  if (xdg != env.end() && xdg->second.starts_with('/') && OwnDirectory(xdg->second, uid) &&
      access(xdg->second.c_str(), W_OK | X_OK) == 0)
    return xdg->second + "/dlaunch";
  return fmt::format("{}/dlaunch-{}", DefaultTempParent(), uid);
}

Status OpenLiveDir(const std::string& dir, uid_t uid) {
  // Checked first, made only when missing: a mkdir that finds the directory
  // there still locks its parent (/tmp) for writing, which every agent
  // starting on the machine contends for.
  Status there = CheckLiveDir(dir, uid);
  if (there.code() != Code::kNotFound) return there;
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::Io(fmt::format("{}: cannot create ({})", dir, std::strerror(errno)));
  return CheckLiveDir(dir, uid);
}

Status CheckLiveDir(const std::string& dir, uid_t uid) {
  // lstat, not stat: a symlink planted by someone else must not lead us elsewhere.
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{}: does not exist", dir));
    return Status::Io(fmt::format("{}: cannot read ({})", dir, std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode)) return Status::InvalidArgument(fmt::format("{}: refused (a symlink)", dir));
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(fmt::format("{}: refused (not a directory)", dir));
  if (st.st_uid != uid)
    return Status::InvalidArgument(fmt::format("{}: refused (owned by uid {}, not {})", dir, st.st_uid, uid));
  if ((st.st_mode & 077) != 0)
    return Status::InvalidArgument(
        fmt::format("{}: refused (mode {:04o} lets other users in; 0700 expected)", dir, st.st_mode & 07777));
  return Status::Ok();
}

std::string LiveSocketPrefix(const std::string& dir, const std::string& run_id) {
  std::string id;
  for (char c : run_id) id += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  // Room for "/" + ".PID.sock" with the longest pid (10 digits).
  size_t room = kSunPath > dir.size() + 1 + 16 ? kSunPath - dir.size() - 1 - 16 : 1;
  if (id.size() > room) id.resize(room);
  return id + ".";
}

std::string LiveSocketName(const std::string& dir, const std::string& run_id, int pid) {
  return fmt::format("{}{}.sock", LiveSocketPrefix(dir, run_id), pid);
}

std::optional<int> LiveSocketPid(const std::string& name) {
  if (!name.ends_with(".sock")) return std::nullopt;
  std::string stem = name.substr(0, name.size() - 5);
  size_t dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size() || stem.size() - dot > 11) return std::nullopt;
  int64_t pid = 0;  // at most 10 digits: no overflow
  for (size_t i = dot + 1; i < stem.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(stem[i]))) return std::nullopt;
    pid = pid * 10 + (stem[i] - '0');
  }
  return pid > 0 && pid <= INT32_MAX ? std::optional<int>(static_cast<int>(pid)) : std::nullopt;
}

boost::json::object RunLiveSource::Header() const {
  boost::json::array command;
  for (const std::string& a : job_.command) command.emplace_back(a);
  return boost::json::object{{"run_id", job_.run_id},
                             {"pid", static_cast<int>(getpid())},
                             {"started", job_.started},
                             {"command", std::move(command)},
                             {"ranks", job_.ranks}};
}

void RunLiveSource::Status(std::function<void(boost::json::object)> reply) {
  boost::json::object doc = Header();
  doc["rows"] = run_ != nullptr ? run_->Rows() : boost::json::array();
  reply(std::move(doc));
}

void RunLiveSource::Stacks(std::function<void(boost::json::object)> reply) {
  if (run_ == nullptr) {
    boost::json::object doc = Header();
    doc["stacks"] = boost::json::array();
    return reply(std::move(doc));
  }
  run_->Stacks([header = Header(), reply = std::move(reply)](std::vector<RankStack> stacks) mutable {
    boost::json::array out;
    for (const RankStack& s : stacks) out.push_back(ToJson(s));
    header["stacks"] = std::move(out);
    reply(std::move(header));
  });
}

struct LiveServer::Session {
  Session(asio::io_context& io, Local::socket s, size_t max_request)
      : request(max_request), timer(io), socket(std::move(s)) {}
  std::string reply;
  size_t sent = 0;          // of `reply`
  asio::streambuf request;  // capped: a longer line fails the read
  asio::steady_timer timer;
  Local::socket socket;

  // Cancels what it waits for; its handlers then run with an error and let it go.
  void Close() {
    boost::system::error_code ignored;
    timer.cancel();
    socket.close(ignored);
  }
};

LiveServer::LiveServer(asio::io_context& io, std::string path, LiveSource& source,
                       std::function<void(const std::string&)> log, LiveServerOptions options)
    : io_(io),
      path_(std::move(path)),
      source_(source),
      log_(std::move(log)),
      options_(options),
      acceptor_(io),
      accept_retry_(io, [this](const std::string& what) {
        if (log_) log_(path_ + ": " + what);
      }) {}

Result<std::unique_ptr<LiveServer>> LiveServer::Start(asio::io_context& io, const std::string& path, LiveSource& source,
                                                      std::function<void(const std::string&)> log,
                                                      LiveServerOptions options) {
  std::unique_ptr<LiveServer> server(new LiveServer(io, path, source, std::move(log), options));
  boost::system::error_code ec;
  server->acceptor_.open(Local(), ec);
  if (!ec) server->acceptor_.bind(Local::endpoint(path), ec);
  // A file there is ours from an earlier life of this pid, or a stale one:
  // removed only then. An unlink up front locks the directory that every
  // dlaunch of this user shares, and a thousand agents starting at once wait
  // on each other for it (bench/profile/agent.md).
  if (ec == boost::asio::error::address_in_use) {
    unlink(path.c_str());
    ec.clear();
    server->acceptor_.bind(Local::endpoint(path), ec);
  }
  // The directory (0700) already keeps others out while the file has the umask's mode.
  if (!ec && chmod(path.c_str(), 0600) != 0) ec.assign(errno, boost::system::system_category());
  if (!ec) server->acceptor_.listen(static_cast<int>(options.max_clients), ec);
  if (ec) {
    boost::system::error_code ignored;
    server->acceptor_.close(ignored);
    unlink(path.c_str());
    return Status::Io(fmt::format("{}: cannot listen ({})", path, ec.message()));
  }
  server->Accept();
  return server;
}

LiveServer::~LiveServer() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (auto& [id, session] : sessions_) session->Close();
  sessions_.clear();  // queued handlers hold theirs until they run, and see the token
  unlink(path_.c_str());
}

void LiveServer::Accept() {
  acceptor_.async_accept([this, alive = life_.token()](boost::system::error_code ec, Local::socket socket) {
    if (alive.expired()) return;
    // Out of descriptors or memory: wait, and say so once (AcceptRetry).
    if (ec) return accept_retry_.Failed(ec, [this] { Accept(); });
    accept_retry_.Accepted();
    // Only this user (or root) may ask, whatever the file's mode says.
    ucred cred{};
    socklen_t len = sizeof cred;
    bool same_user = getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
                     (cred.uid == geteuid() || cred.uid == 0);
    if (same_user && sessions_.size() < options_.max_clients) {
      uint64_t id = next_id_++;
      sessions_[id] = std::make_shared<Session>(io_, std::move(socket), options_.max_request);
      Arm(id, options_.request_timeout);
      ReadRequest(id);
    } else if (same_user) {
      // Busy: one line for the client, without waiting for it to read.
      std::string busy = fmt::format(R"({{"error":"busy: {} clients already"}})", options_.max_clients);
      socket.non_blocking(true, ec);
      socket.write_some(asio::buffer(busy), ec);
    }
    // `socket`, when not taken, closes here.
    Accept();
  });
}

void LiveServer::Arm(uint64_t id, std::chrono::milliseconds limit) {
  std::shared_ptr<Session> s = sessions_.at(id);
  s->timer.expires_after(limit);
  s->timer.async_wait([this, id, s, alive = life_.token()](boost::system::error_code ec) {
    if (!ec && !alive.expired()) Drop(id);
  });
}

void LiveServer::Drop(uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  it->second->Close();
  sessions_.erase(it);
}

void LiveServer::ReadRequest(uint64_t id) {
  std::shared_ptr<Session> s = sessions_.at(id);
  asio::async_read_until(
      s->socket, s->request, '\n', [this, id, s, alive = life_.token()](boost::system::error_code ec, size_t n) {
        if (alive.expired() || !sessions_.contains(id)) return;
        // Junk, a line past the cap, or a client that closed: dropped.
        if (ec) return Drop(id);
        auto data = s->request.data();
        std::string line(asio::buffers_begin(data), asio::buffers_begin(data) + static_cast<std::ptrdiff_t>(n));
        Answer(id, line);
      });
}

void LiveServer::Answer(uint64_t id, const std::string& request) {
  Arm(id, options_.answer_timeout);
  auto reply = [this, id, alive = life_.token()](boost::json::object doc) {
    if (alive.expired() || !sessions_.contains(id)) return;
    Reply(id, boost::json::serialize(doc));
  };
  if (request == "status\n") return source_.Status(reply);
  if (request == "stacks\n") return source_.Stacks(reply);
  Reply(id, R"j({"error":"unknown request (expected 'status' or 'stacks')"})j");
}

void LiveServer::Reply(uint64_t id, std::string body) {
  std::shared_ptr<Session> s = sessions_.at(id);
  s->reply = std::move(body);
  s->reply += '\n';
  s->sent = 0;
  WriteReply(id);
}

void LiveServer::WriteReply(uint64_t id) {
  std::shared_ptr<Session> s = sessions_.at(id);
  // The bound is on the reader's stalls, not on the whole reply: a client on a
  // busy machine that takes a stack of megabytes slowly is served to the end.
  Arm(id, options_.reply_timeout);
  s->socket.async_write_some(asio::buffer(s->reply) + s->sent,
                             [this, id, s, alive = life_.token()](boost::system::error_code ec, size_t n) {
                               if (alive.expired() || !sessions_.contains(id)) return;
                               s->sent += n;
                               if (ec || s->sent == s->reply.size()) return Drop(id);
                               WriteReply(id);
                             });
}

}  // namespace dlaunch::launcher
