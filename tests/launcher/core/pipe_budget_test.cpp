#include "launcher/core/pipe_budget.hpp"

#include <cerrno>
#include <map>

#include <catch2/catch.hpp>

using namespace dlaunch::launcher;
using namespace std::chrono_literals;

namespace {

// Pipes by number, with Linux's rules: a grow past what the user may still
// take is refused with EPERM; a number that is no pipe is EBADF.
struct FakePipes : PipeSizes {
  std::map<int, int> size;
  int user_left = 1 << 30;  // bytes this user may still add before the soft limit
  int sets = 0;
  int Get(int fd) override { return size.contains(fd) ? size[fd] : -1; }
  int Set(int fd, int bytes) override {
    ++sets;
    if (!size.contains(fd)) {
      errno = EBADF;
      return -1;
    }
    int adds = bytes - size[fd];
    if (adds > user_left) {
      errno = EPERM;
      return -1;
    }
    user_left -= adds;
    return size[fd] = bytes;
  }
};

constexpr int kDefault = 64 << 10;
constexpr size_t kAdds = kBusyPipeBytes - kDefault;

}  // namespace

TEST_CASE("pipe budget: a pipe grows to 1 MiB while the job's budget has room", "[pipes]") {
  FakePipes pipes;
  for (int fd = 3; fd < 8; ++fd) pipes.size[fd] = kDefault;
  PipeBudget budget(pipes, 3 * kAdds);
  CHECK(budget.Grow(3) == PipeBudget::Outcome::kGrown);
  CHECK(pipes.size[3] == kBusyPipeBytes);
  CHECK(budget.Grow(3) == PipeBudget::Outcome::kAlready);  // once is enough
  CHECK(budget.Grow(4) == PipeBudget::Outcome::kGrown);
  CHECK(budget.Grow(5) == PipeBudget::Outcome::kGrown);
  CHECK(budget.used() == 3 * kAdds);
  int sets = pipes.sets;
  CHECK(budget.Grow(6) == PipeBudget::Outcome::kNoRoom);  // spent: not even asked
  CHECK(pipes.sets == sets);
  CHECK(pipes.size[6] == kDefault);
  // A pipe that closes gives its share back.
  budget.Closed(4);
  CHECK(budget.used() == 2 * kAdds);
  CHECK(budget.Grow(6) == PipeBudget::Outcome::kGrown);
  budget.Closed(7);  // never grown: nothing to give back
  CHECK(budget.used() == 3 * kAdds);
  CHECK_FALSE(budget.TakeRefusal());
}

TEST_CASE("pipe budget: a small pipe is charged what it adds; a large one or no pipe is left alone", "[pipes]") {
  FakePipes pipes;
  pipes.size[3] = 8 << 10;  // made past the user's limit: Linux gave it two pages
  pipes.size[4] = kBusyPipeBytes;
  PipeBudget budget(pipes, kJobPipeBudget);
  CHECK(budget.Grow(3) == PipeBudget::Outcome::kGrown);
  CHECK(budget.used() == kBusyPipeBytes - (8 << 10));
  CHECK(budget.Grow(4) == PipeBudget::Outcome::kAlready);
  CHECK(budget.Grow(99) == PipeBudget::Outcome::kAlready);  // not a pipe
  CHECK(budget.used() == kBusyPipeBytes - (8 << 10));
}

TEST_CASE("pipe budget: Linux's refusal is said once, and the pipe stays as it is", "[pipes]") {
  FakePipes pipes;
  for (int fd = 3; fd < 6; ++fd) pipes.size[fd] = kDefault;
  pipes.user_left = static_cast<int>(kAdds);  // room for one more grown pipe
  PipeBudget budget(pipes, kJobPipeBudget);
  CHECK(budget.Grow(3) == PipeBudget::Outcome::kGrown);
  CHECK_FALSE(budget.TakeRefusal());
  CHECK(budget.Grow(4) == PipeBudget::Outcome::kRefused);
  CHECK(pipes.size[4] == kDefault);
  CHECK(budget.used() == kAdds);  // a refusal costs the budget nothing
  std::optional<std::string> line = budget.TakeRefusal();
  REQUIRE(line);
  CHECK(*line ==
        "output: a busy pipe stays at 64 KiB, not 1024 KiB (Linux refused: this user's pipes have reached "
        "fs.pipe-user-pages-soft; output goes on, with more wake-ups)");
  CHECK(budget.Grow(5) == PipeBudget::Outcome::kRefused);
  CHECK_FALSE(budget.TakeRefusal());  // once per job
}

TEST_CASE("busy meter: fast output is busy within a few reads, a trickle never", "[pipes]") {
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  BusyMeter fast;
  int reads = 0;
  while (!fast.Moved(64 << 10, t0 + reads * 1ms)) ++reads;
  CHECK(reads + 1 == static_cast<int>(kBusyStreamBytes / (64 << 10)));
  CHECK(fast.Moved(1, t0 + 1h));  // busy stays busy
  // A line of 4 KiB every 10 ms for a minute: 400 KB/s, never busy.
  BusyMeter trickle;
  bool busy = false;
  for (int i = 0; i < 6000; ++i) busy = busy || trickle.Moved(4096, t0 + i * 10ms);
  CHECK_FALSE(busy);
  // A burst bigger than the threshold in one window is busy.
  BusyMeter burst;
  CHECK_FALSE(burst.Moved(kBusyStreamBytes - 1, t0));
  CHECK(burst.Moved(1, t0 + kBusyWindow));
}
