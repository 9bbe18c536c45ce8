#include "launcher/health/health_gate.hpp"

#include <fmt/format.h>

#include "launcher/core/text.hpp"
#include "launcher/health/health_policy.hpp"

namespace dlaunch::launcher {

namespace {

// The longest part of the command a line quotes.
constexpr size_t kCommandShown = 80;

// Whole seconds, rounded up: "next check in 300s", "ends it in 2s".
std::string WholeSeconds(SteadyTime::duration d) {
  auto s = std::chrono::ceil<std::chrono::seconds>(d);
  return fmt::format("{}s", std::max<long long>(0, s.count()));
}

}  // namespace

HealthGate::HealthGate(Timers& timers, SignalSource& signals, HealthChecker& checker, HealthGateOptions options,
                       EventLog* events, Hooks hooks)
    : timers_(timers),
      signals_(signals),
      checker_(checker),
      options_(std::move(options)),
      events_(events),
      hooks_(std::move(hooks)),
      timer_(timers.NewTimer()),
      look_timer_(timers.NewTimer()) {}

HealthGate::~HealthGate() { Stop(); }

std::string HealthGate::Subject() const {
  return fmt::format("health check '{}'", PrintablePrefix(options_.command, kCommandShown));
}

void HealthGate::Admit(SteadyTime deadline, std::function<void()> admit,
                       std::function<void(const std::string&)> give_up) {
  since_ = timers_.Now();
  deadline_ = deadline;
  admit_ = std::move(admit);
  give_up_ = std::move(give_up);
  Busy(true);
  // Just failed before a restart: the next check comes an interval after that one.
  if (held_out_ && last_fail_) return HoldOut();
  CheckNow();
}

bool HealthGate::Due() const { return CheckDue(last_pass_, timers_.Now(), options_.interval); }

void HealthGate::Recheck(std::function<void(bool ok)> done) {
  recheck_ = std::move(done);
  Busy(true);
  CheckNow();
}

void HealthGate::KeepFresh(std::function<bool()> waiting, std::function<void()> failed) {
  waiting_ = std::move(waiting);
  fresh_failed_ = std::move(failed);
  Look();
}

void HealthGate::Look() {
  if (!waiting_) return;
  WaitingStep step = NextWhileWaiting(!checking_ && waiting_(), last_pass_, timers_.Now(), options_.interval);
  if (step.kind == WaitingStep::Kind::kLook) {
    look_timer_->At(step.at, [this] { Look(); });
    return;
  }
  fresh_check_ = true;
  Busy(true);
  CheckNow();
}

void HealthGate::EndWatch() {
  look_timer_->Cancel();
  waiting_ = nullptr;
  fresh_failed_ = nullptr;
}

void HealthGate::Stop() {
  checker_.Cancel();
  checking_ = false;
  fresh_check_ = false;
  timer_->Cancel();
  EndWatch();
  watch_.reset();
  admit_ = nullptr;
  give_up_ = nullptr;
  recheck_ = nullptr;
}

void HealthGate::CheckNow() {
  if (checking_) return;  // the running one answers for both
  checking_ = true;
  checker_.Run([this](CheckOutcome outcome) { Checked(outcome); });
}

void HealthGate::Checked(const CheckOutcome& outcome) {
  checking_ = false;
  bool fresh = std::exchange(fresh_check_, false);
  SteadyTime now = timers_.Now();
  if (outcome.ok) {
    last_pass_ = now;
  } else {
    last_fail_ = now;
    last_failure_ = outcome.Describe();
  }
  bool was_held_out = held_out_;
  held_out_ = !outcome.ok;
  Emit(outcome);
  if (recheck_) {
    std::function<void(bool)> done = std::exchange(recheck_, nullptr);
    if (outcome.ok) {
      Busy(false);
      Look();
    } else {
      EndWatch();
      hooks_.say(fmt::format("{}: {} (before the restart; this node leaves the job and is held out)", Subject(),
                             last_failure_));
    }
    return done(outcome.ok);
  }
  if (fresh) {
    if (outcome.ok) {
      Busy(false);
      return Look();
    }
    std::function<void()> failed = std::exchange(fresh_failed_, nullptr);
    EndWatch();
    hooks_.say(
        fmt::format("{}: {} (while this node waited; it leaves the job and is held out)", Subject(), last_failure_));
    if (failed) failed();
    return;
  }
  if (outcome.ok) {
    if (was_held_out) hooks_.say(fmt::format("{}: passed; this node joins the job", Subject()));
    Busy(false);
    give_up_ = nullptr;
    std::function<void()> admit = std::exchange(admit_, nullptr);
    if (admit) admit();
    return;
  }
  HeldOutStep step = NextAfterFailure(now, options_.interval, deadline_);
  std::string next = step.kind == HeldOutStep::Kind::kRetry
                         ? fmt::format("next check in {}", WholeSeconds(options_.interval))
                         : fmt::format("its join timeout ends it in {}", WholeSeconds(deadline_ - now));
  hooks_.say(fmt::format("{}: {} (this node is held out of the job; {})", Subject(), last_failure_, next));
  HoldOut();
}

void HealthGate::HoldOut() {
  HeldOutStep step = NextAfterFailure(*last_fail_, options_.interval, deadline_);
  if (step.kind == HeldOutStep::Kind::kRetry) {
    timer_->At(step.at, [this] { CheckNow(); });
    return;
  }
  timer_->At(step.at, [this] {
    Busy(false);
    admit_ = nullptr;
    std::function<void(const std::string&)> give_up = std::exchange(give_up_, nullptr);
    std::string line = fmt::format(
        "{}: kept this node out of the job until its join timeout ran out ({} of waiting); "
        "last check: {}",
        Subject(), WholeSeconds(deadline_ - since_), last_failure_);
    if (give_up) give_up(line);
  });
}

void HealthGate::Busy(bool busy) {
  if (!busy) {
    watch_.reset();
    return;
  }
  if (watch_ || options_.stop_signals.empty()) return;
  watch_ = signals_.Watch(options_.stop_signals, [this](int sig) {
    // Stop() resets watch_, and this closure goes with it: nothing of it may be
    // read after, `this` included.
    std::function<void(int)> stopped = hooks_.stopped;
    Stop();
    if (stopped) stopped(sig);
  });
}

void HealthGate::Emit(const CheckOutcome& outcome) {
  if (events_ == nullptr) return;
  events_->Emit("health_check", {{"ok", outcome.ok},
                                 {"how", outcome.how},
                                 {"last_line", outcome.last_line},
                                 {"seconds", std::chrono::duration<double>(outcome.took).count()}});
}

}  // namespace dlaunch::launcher
