#include "launcher/core/signals.hpp"

#include <signal.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <utility>

#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"

namespace dlaunch::launcher {
namespace {

// asio's signal_set hides siginfo_t, so each caught signal's sender is recorded
// by a handler of our own that asio's handler sits behind: it stores si_pid,
// then calls asio's, which queues the signal for the loop. Async-signal-safe:
// an atomic store and a call.
std::atomic<pid_t> g_sender[NSIG];
void (*g_asio_handler[NSIG])(int);

void RecordSender(int sig, siginfo_t* info, void*) {
  if (sig <= 0 || sig >= NSIG) return;
  g_sender[sig].store(info != nullptr && info->si_code <= 0 ? info->si_pid : 0, std::memory_order_relaxed);
  if (void (*asio)(int) = g_asio_handler[sig]) asio(sig);
}

// After asio installed its handler for `sig`: put RecordSender in front of it.
void WrapAsioHandler(int sig) {
  struct sigaction now {};
  if (sig <= 0 || sig >= NSIG || sigaction(sig, nullptr, &now) != 0) return;
  if ((now.sa_flags & SA_SIGINFO) != 0 || now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN) return;
  g_asio_handler[sig] = now.sa_handler;
  struct sigaction mine = now;
  mine.sa_flags |= SA_SIGINFO;
  mine.sa_sigaction = RecordSender;
  sigaction(sig, &mine, nullptr);
}

class AsioSignalWatch final : public SignalWatch {
 public:
  AsioSignalWatch(boost::asio::io_context& io, const std::vector<int>& signals, std::function<void(int)> on_signal)
      : set_(io), on_signal_(std::move(on_signal)) {
    for (int sig : signals) {
      set_.add(sig);
      WrapAsioHandler(sig);
    }
    Wait();
  }
  ~AsioSignalWatch() override { Cancel(); }

  void Cancel() override {
    cancelled_ = true;
    boost::system::error_code ignored;
    set_.cancel(ignored);
  }

 private:
  void Wait() {
    set_.async_wait([this, alive = life_.token()](boost::system::error_code ec, int sig) {
      // A signal queued just before Cancel still completes with success.
      if (ec || alive.expired() || cancelled_) return;
      Wait();
      on_signal_(sig);  // may destroy this watch: nothing here after it
    });
  }

  boost::asio::signal_set set_;
  std::function<void(int)> on_signal_;
  bool cancelled_ = false;
  Lifetime life_;  // last: expires first
};

}  // namespace

std::string AsioSignals::SenderCommand(int sig) const {
  if (sig <= 0 || sig >= NSIG) return "";
  pid_t pid = g_sender[sig].load(std::memory_order_relaxed);
  if (pid <= 0) return "";
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(comm, name);
  return name;
}

std::unique_ptr<SignalWatch> AsioSignals::Watch(const std::vector<int>& signals, std::function<void(int)> on_signal) {
  return std::make_unique<AsioSignalWatch>(io_, signals, std::move(on_signal));
}

}  // namespace dlaunch::launcher
