#include "launcher/core/timers.hpp"

#include <memory>
#include <utility>

#include <boost/asio/steady_timer.hpp>

#include "launcher/core/event_loop.hpp"

namespace dlaunch::launcher {
namespace {

class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(boost::asio::io_context& io) : timer_(io) {}
  ~AsioTimer() override { Cancel(); }

  void At(SteadyTime at, std::function<void()> fire) override {
    // A completion already queued when the timer is re-armed or cancelled still
    // runs, with success: each arming has a generation, and only the last fires.
    const unsigned armed = ++generation_;
    timer_.expires_at(at);
    timer_.async_wait([this, armed, alive = life_.token(), fire = std::move(fire)](boost::system::error_code ec) {
      if (ec || alive.expired() || armed != generation_) return;
      fire();
    });
  }
  void Cancel() override {
    ++generation_;
    timer_.cancel();
  }

 private:
  boost::asio::steady_timer timer_;
  unsigned generation_ = 0;
  Lifetime life_;  // last: expires first
};

}  // namespace

std::unique_ptr<Timer> AsioTimers::NewTimer() { return std::make_unique<AsioTimer>(io_); }

}  // namespace dlaunch::launcher
