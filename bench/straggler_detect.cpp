// What one window of the straggler detector costs the process hosting a large
// job's coordinator: N ranks of K frames each, SLOW of them slow (one by
// default; half of them, a slower pool of nodes, makes half stand out), compared
// once (StragglerDetector::Window). Prints "ranks=N frames=K window_ms=M
// named=R" with M the median of `rounds` windows. Used by bench/run.sh.
//   straggler_detect [RANKS] [FRAMES] [ROUNDS] [SLOW]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "launcher/straggler/detector.hpp"

using dlaunch::launcher::RankWindow;
using dlaunch::launcher::StragglerDetector;

int main(int argc, char** argv) {
  int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  int frames = argc > 2 ? std::atoi(argv[2]) : 32;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 9;
  int slow_ranks = argc > 4 ? std::atoi(argv[4]) : 1;
  if (ranks < 2 || frames < 2 || rounds < 1 || slow_ranks < 1 || slow_ranks > ranks / 2) {
    std::fprintf(stderr, "usage: straggler_detect [RANKS>=2] [FRAMES>=2] [ROUNDS>=1] [SLOW: 1 to RANKS/2]\n");
    return 2;
  }
  std::vector<RankWindow> windows(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    RankWindow& w = windows[static_cast<size_t>(r)];
    w.rank = r;
    w.node_rank = r / 8;
    w.host = "n" + std::to_string(r / 8);
    w.samples.period_ms = 100;
    w.samples.ticks = 600;
    bool slow = r >= ranks / 2 && r < ranks / 2 + slow_ranks;
    w.samples.top["torch/autograd/__init__.py:197 backward"] = slow ? 30 : 240;
    w.samples.user["train.py:40 step"] = slow ? 30 : 240;
    w.samples.user["data.py:17 load_batch"] = slow ? 250 : 20;
    for (int f = 0; f < frames - 2; ++f)
      w.samples.user["model.py:" + std::to_string(f) + " layer"] = (600 - 260) / (frames - 2);
  }
  std::vector<double> ms;
  size_t named = 0;
  for (int i = 0; i < rounds; ++i) {
    StragglerDetector d({});
    d.Window(windows);
    auto start = std::chrono::steady_clock::now();
    named = d.Window(windows).named.size();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("ranks=%d frames=%d window_ms=%.3f named=%zu\n", ranks, frames, ms[ms.size() / 2], named);
  return (slow_ranks == 1 ? named == 1 : named > 0) ? 0 : 1;
}
