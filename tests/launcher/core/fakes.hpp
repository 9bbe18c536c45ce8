// Fakes of launcher/core's seams, for the tests of every layer above it: a
// clock that moves only when the test says, with timers on it, and signals the
// test raises.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/core/signals.hpp"
#include "launcher/core/timers.hpp"

namespace dlaunch::testing {

// A clock that stands still until Advance, and timers on it. Advance fires
// each timer that comes due on the way, in time order, with the clock at its
// due time. `settle`, when set, runs before each timer and at the end (the
// process tests run what is ready on their loop, as the real loop would).
class FakeTimers : public launcher::Timers {
 public:
  explicit FakeTimers(std::function<void()> settle = {}) : settle_(std::move(settle)) {}

  launcher::SteadyTime Now() const override { return now_; }
  std::unique_ptr<launcher::Timer> NewTimer() override { return std::make_unique<FakeTimer>(*this); }

  void Advance(std::chrono::steady_clock::duration d) {
    const launcher::SteadyTime until = now_ + d;
    for (;;) {
      Settle();
      FakeTimer* next = nullptr;
      for (FakeTimer* t : timers_)
        if (t->fire_ && t->at_ <= until && (next == nullptr || t->at_ < next->at_)) next = t;
      if (next == nullptr) break;
      now_ = std::max(now_, next->at_);
      std::function<void()> fire = std::exchange(next->fire_, nullptr);
      fire();
    }
    now_ = until;
    Settle();
  }
  // The earliest armed timer's time, or nullopt.
  std::optional<launcher::SteadyTime> NextDue() const {
    std::optional<launcher::SteadyTime> due;
    for (const FakeTimer* t : timers_)
      if (t->fire_ && (!due || t->at_ < *due)) due = t->at_;
    return due;
  }

 private:
  struct FakeTimer : launcher::Timer {
    explicit FakeTimer(FakeTimers& owner) : owner_(owner) { owner_.timers_.push_back(this); }
    ~FakeTimer() override { std::erase(owner_.timers_, this); }
    void At(launcher::SteadyTime at, std::function<void()> fire) override {
      at_ = at;
      fire_ = std::move(fire);
    }
    void Cancel() override { fire_ = nullptr; }
    FakeTimers& owner_;
    launcher::SteadyTime at_{};
    std::function<void()> fire_;
  };
  void Settle() {
    if (settle_) settle_();
  }

  std::function<void()> settle_;
  launcher::SteadyTime now_{std::chrono::hours(1)};
  std::vector<FakeTimer*> timers_;
};

// Signals the test raises: Raise(sig) reaches every live watch of `sig`.
class FakeSignals : public launcher::SignalSource {
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
  std::string SenderCommand(int) const override { return sender; }
  std::string sender;  // what SenderCommand says, for every signal

 private:
  struct FakeWatch : launcher::SignalWatch {
    FakeWatch(FakeSignals& owner, std::vector<int> signals, std::function<void(int)> on_signal)
        : owner_(owner), signals_(std::move(signals)), on_signal_(std::move(on_signal)) {
      owner_.watches_.push_back(this);
    }
    ~FakeWatch() override { std::erase(owner_.watches_, this); }
    void Cancel() override { cancelled_ = true; }
    FakeSignals& owner_;
    std::vector<int> signals_;
    std::function<void(int)> on_signal_;
    bool cancelled_ = false;
  };
  std::vector<FakeWatch*> watches_;
};

}  // namespace dlaunch::testing
