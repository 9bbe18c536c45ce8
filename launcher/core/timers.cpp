#include "launcher/core/timers.hpp"

#include <memory>
#include <utility>

#include <boost/asio/steady_timer.hpp>

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
    timer_.async_wait([this, armed, alive = std::weak_ptr<int>(alive_), fire = std::move(fire)](
                          boost::system::error_code ec) {
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
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expires with this timer
};

}  // namespace

std::unique_ptr<Timer> AsioTimers::NewTimer() { return std::make_unique<AsioTimer>(io_); }

}  // namespace dlaunch::launcher
