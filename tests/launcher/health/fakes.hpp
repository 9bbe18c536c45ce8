// Fakes for the health gate's tests: a checker the test answers by hand; the
// clock and the signals are core's (tests/launcher/core/fakes.hpp).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/health/health_check.hpp"
#include "tests/launcher/core/fakes.hpp"

namespace dlaunch::testing {

using launcher::SteadyTime;

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
