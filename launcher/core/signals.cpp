#include "launcher/core/signals.hpp"

#include <memory>
#include <utility>

#include <boost/asio/signal_set.hpp>

#include "launcher/core/event_loop.hpp"

namespace dlaunch::launcher {
namespace {

class AsioSignalWatch final : public SignalWatch {
 public:
  AsioSignalWatch(boost::asio::io_context& io, const std::vector<int>& signals, std::function<void(int)> on_signal)
      : set_(io), on_signal_(std::move(on_signal)) {
    for (int sig : signals) set_.add(sig);
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

std::unique_ptr<SignalWatch> AsioSignals::Watch(const std::vector<int>& signals, std::function<void(int)> on_signal) {
  return std::make_unique<AsioSignalWatch>(io_, signals, std::move(on_signal));
}

}  // namespace dlaunch::launcher
