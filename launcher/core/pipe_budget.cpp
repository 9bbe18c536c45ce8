#include "launcher/core/pipe_budget.hpp"

#include <fcntl.h>

#include <cerrno>

#include <fmt/format.h>

namespace dlaunch::launcher {

namespace {

class KernelPipeSizes : public PipeSizes {
 public:
  int Get(int fd) override { return fcntl(fd, F_GETPIPE_SZ); }
  int Set(int fd, int bytes) override { return fcntl(fd, F_SETPIPE_SZ, bytes); }
};

}  // namespace

PipeSizes& SystemPipeSizes() {
  static KernelPipeSizes sizes;
  return sizes;
}

bool BusyMeter::Moved(size_t n, Clock::time_point now) {
  if (busy_) return true;
  if (!since_ || now - *since_ > kBusyWindow) {
    since_ = now;
    bytes_ = 0;
  }
  bytes_ += n;
  busy_ = bytes_ >= kBusyStreamBytes;
  return busy_;
}

PipeBudget::Outcome PipeBudget::Grow(int fd) {
  int now = sizes_.Get(fd);
  if (now < 0 || now >= kBusyPipeBytes) return Outcome::kAlready;
  size_t adds = static_cast<size_t>(kBusyPipeBytes - now);
  if (used_ + adds > budget_) return Outcome::kNoRoom;
  int got = sizes_.Set(fd, kBusyPipeBytes);
  if (got < 0) {
    if (errno != EPERM) return Outcome::kAlready;  // not a pipe after all, or closed: nothing to grow
    if (!refusal_)
      refusal_ = fmt::format(
          "output: a busy pipe stays at {} KiB, not {} KiB (Linux refused: this user's pipes have reached "
          "fs.pipe-user-pages-soft; output goes on, with more wake-ups)",
          now / 1024, kBusyPipeBytes / 1024);
    return Outcome::kRefused;
  }
  if (got <= now) return Outcome::kAlready;
  size_t added = static_cast<size_t>(got - now);
  used_ += added;
  grown_[fd] += added;
  return Outcome::kGrown;
}

void PipeBudget::Closed(int fd) {
  auto it = grown_.find(fd);
  if (it == grown_.end()) return;
  used_ -= it->second;
  grown_.erase(it);
}

std::optional<std::string> PipeBudget::TakeRefusal() {
  if (!refusal_ || refusal_said_) return std::nullopt;
  refusal_said_ = true;
  return refusal_;
}

}  // namespace dlaunch::launcher
