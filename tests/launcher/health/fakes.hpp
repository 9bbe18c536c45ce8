// Fakes for the health gate's tests: a clock that moves only when the test
// says, signals the test raises, and a checker the test answers by hand.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/core/signals.hpp"
#include "launcher/core/timers.hpp"
#include "launcher/health/health_check.hpp"

namespace dlaunch::testing {

using launcher::SteadyTime;

class HealthFakeTimers : public launcher::Timers {
 public:
  SteadyTime Now() const override { return now_; }
  std::unique_ptr<launcher::Timer> NewTimer() override { return std::make_unique<FakeTimer>(*this); }

  // Moves the clock by `d`, firing each timer due on the way, in time order.
  void Advance(std::chrono::steady_clock::duration d) {
    const SteadyTime until = now_ + d;
    for (;;) {
      FakeTimer* next = nullptr;
      for (FakeTimer* t : timers_)
        if (t->fire_ && t->at_ <= until && (next == nullptr || t->at_ < next->at_)) next = t;
      if (next == nullptr) break;
      now_ = std::max(now_, next->at_);
      std::function<void()> fire = std::exchange(next->fire_, nullptr);
      fire();
    }
    now_ = until;
  }
  std::optional<SteadyTime> NextDue() const {
    std::optional<SteadyTime> due;
    for (const FakeTimer* t : timers_)
      if (t->fire_ && (!due || t->at_ < *due)) due = t->at_;
    return due;
  }

 private:
  struct FakeTimer : launcher::Timer {
    explicit FakeTimer(HealthFakeTimers& owner) : owner_(owner) { owner_.timers_.push_back(this); }
    ~FakeTimer() override { std::erase(owner_.timers_, this); }
    void At(SteadyTime at, std::function<void()> fire) override {
      at_ = at;
      fire_ = std::move(fire);
    }
    void Cancel() override { fire_ = nullptr; }
    HealthFakeTimers& owner_;
    SteadyTime at_{};
    std::function<void()> fire_;
  };
  SteadyTime now_{std::chrono::hours(1)};
  std::vector<FakeTimer*> timers_;
};

class HealthFakeSignals : public launcher::SignalSource {
 public:
  std::unique_ptr<launcher::SignalWatch> Watch(const std::vector<int>& signals,
                                               std::function<void(int)> on_signal) override {
    return std::make_unique<FakeWatch>(*this, signals, std::move(on_signal));
  }
  // Returns how many watches heard it.
  int Raise(int sig) {
    std::vector<FakeWatch*> hearing;
    for (FakeWatch* w : watches_)
      if (!w->cancelled_ && std::find(w->signals_.begin(), w->signals_.end(), sig) != w->signals_.end())
        hearing.push_back(w);
    for (FakeWatch* w : hearing) w->on_signal_(sig);
    return static_cast<int>(hearing.size());
  }
  size_t watches() const { return watches_.size(); }

 private:
  struct FakeWatch : launcher::SignalWatch {
    FakeWatch(HealthFakeSignals& owner, std::vector<int> signals, std::function<void(int)> on_signal)
        : owner_(owner), signals_(std::move(signals)), on_signal_(std::move(on_signal)) {
      owner_.watches_.push_back(this);
    }
    ~FakeWatch() override { std::erase(owner_.watches_, this); }
    void Cancel() override { cancelled_ = true; }
    HealthFakeSignals& owner_;
    std::vector<int> signals_;
    std::function<void(int)> on_signal_;
    bool cancelled_ = false;
  };
  std::vector<FakeWatch*> watches_;
};

// A check that runs until the test answers it.
class FakeChecker : public launcher::HealthChecker {
 public:
  void Run(std::function<void(launcher::CheckOutcome)> done) override {
    REQUIRE_FALSE(running());  // one at a time
    done_ = std::move(done);
    ++runs;
  }
  void Cancel() override {
    if (running()) ++cancels;
    done_ = nullptr;
  }
  bool running() const { return static_cast<bool>(done_); }
  void Pass() { Answer({true, "passed", "", "", std::chrono::milliseconds(20)}); }
  void Fail(const std::string& how, const std::string& last_line) {
    Answer({false, how, last_line, last_line + "\n", std::chrono::milliseconds(20)});
  }
  void Answer(launcher::CheckOutcome o) {
    REQUIRE(running());
    std::exchange(done_, nullptr)(std::move(o));
  }
  int runs = 0;
  int cancels = 0;

 private:
  std::function<void(launcher::CheckOutcome)> done_;
};

}  // namespace dlaunch::testing
