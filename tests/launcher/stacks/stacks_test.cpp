#include "launcher/stacks/stacks.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

// A Python 3.11 faulthandler dump of a process with a data-loader thread; the
// signal ran on the main thread ("Current thread").
constexpr const char* kPythonDump =
    "Thread 0x00007f0d2b7fe640 (most recent call first):\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
    "  File \"/usr/lib/python3.11/queue.py\", line 180 in get\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n"
    "\n"
    "Current thread 0x00007f0d3a1b7040 (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541 in all_reduce\n"
    "  File \"/work/train.py\", line 88 in step\n"
    "  File \"/work/train.py\", line 120 in main\n"
    "  File \"/work/train.py\", line 123 in <module>\n";

constexpr const char* kGdbDump =
    "[Thread debugging using libthread_db enabled]\n"
    "0x00007f1c in __GI___clock_nanosleep () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "\n"
    "Thread 2 (Thread 0x7f1b (LWP 4243) \"worker\"):\n"
    "#0  0x00007f1c in __futex_abstimed_wait_common () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "#1  0x000055 in pool_wait (p=0x1) at pool.c:40\n"
    "\n"
    "Thread 1 (Thread 0x7f1a (LWP 4242) \"app\"):\n"
    "#0  __GI___clock_nanosleep (clock_id=0, flags=0, req=0x7ffc, rem=0x0) at "
    "../sysdeps/unix/sysv/linux/clock_nanosleep.c:71\n"
    "#1  0x00007f1c in __GI___nanosleep (req=<optimized out>, rem=<optimized out>) at nanosleep.c:25\n"
    "#2  0x000055 in main (argc=2, argv=0x7ffc) at /src/app.c:12\n"
    "#3  0x000055 in ?? ()\n";

RankStack Python(int rank, const std::string& dump) {
  RankStack s;
  s.rank = rank;
  s.pid = 1000 + rank;
  s.how = "python";
  s.raw = dump;
  s.threads = ParseFaulthandler(dump);
  return s;
}

std::string Dump(const std::string& innermost_file, int line, const std::string& function) {
  return "Current thread 0x1 (most recent call first):\n  File \"" + innermost_file + "\", line " +
         std::to_string(line) + " in " + function + "\n  File \"/w/train.py\", line 88 in step\n";
}

}  // namespace

TEST_CASE("faulthandler's dump: every thread, the main one marked, frames innermost first", "[stacks]") {
  std::vector<ThreadStack> t = ParseFaulthandler(kPythonDump);
  REQUIRE(t.size() == 2);
  CHECK_FALSE(t[0].main);
  CHECK(t[0].frames.size() == 3);
  CHECK(t[1].main);
  CHECK(t[1].name == "Current thread 0x00007f0d3a1b7040");
  REQUIRE(t[1].frames.size() == 4);
  CHECK(t[1].frames[0].Render() == "all_reduce (distributed_c10d.py:1541)");
  CHECK(t[1].frames[1].Render() == "step (train.py:88)");
  CHECK(t[1].frames[3].Render() == "<module> (train.py:123)");
  CHECK(ParseFaulthandler("garbage\n\x01\x02").empty());
}

TEST_CASE("with the hook's main-thread ident: that thread is main, the hook's own thread is left out", "[stacks]") {
  // The hook's idle thread ran the dump ("Current thread"); the script's main
  // thread is a plain "Thread" block.
  const std::string dump =
      "Current thread 0x00007f0d2a000640 (most recent call first):\n"
      "  File \"/run/py/sitecustomize.py\", line 40 in _watch\n"
      "\n"
      "Thread 0x00007f0d2b7fe640 (most recent call first):\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
      "\n"
      "Thread 0x00007f0d3a1b7040 (most recent call first):\n"
      "  File \"/work/train.py\", line 13 in load_batch\n"
      "  File \"/work/train.py\", line 88 in step\n";
  std::vector<ThreadStack> t = ParseFaulthandler(dump, "0x00007f0d3a1b7040");
  REQUIRE(t.size() == 2);
  CHECK_FALSE(t[0].main);
  CHECK(t[0].frames.size() == 1);
  CHECK(t[1].main);
  CHECK(t[1].name == "Thread 0x00007f0d3a1b7040");
  REQUIRE(t[1].frames.size() == 2);
  CHECK(t[1].frames[0].Render() == "load_batch (train.py:13)");
  RankStack r;
  r.threads = t;
  REQUIRE(r.Main() != nullptr);
  CHECK(r.Main()->frames[1].Render() == "step (train.py:88)");
  // An ident that matches no thread: no main thread, rather than a wrong one.
  std::vector<ThreadStack> none = ParseFaulthandler(dump, "0x0000000000000001");
  CHECK(none.size() == 2);
  for (const ThreadStack& th : none) CHECK_FALSE(th.main);
}

TEST_CASE("gdb's backtrace: the thread whose LWP is the pid is main; frames with and without sources", "[stacks]") {
  std::vector<ThreadStack> t = ParseGdb(kGdbDump, 4242);
  REQUIRE(t.size() == 2);
  CHECK_FALSE(t[0].main);
  CHECK(t[0].frames[0].Render() == "__futex_abstimed_wait_common (libc.so.6)");
  CHECK(t[0].frames[1].Render() == "pool_wait (pool.c:40)");
  CHECK(t[1].main);
  REQUIRE(t[1].frames.size() == 4);
  CHECK(t[1].frames[0].Render() == "__GI___clock_nanosleep (clock_nanosleep.c:71)");
  CHECK(t[1].frames[2].Render() == "main (app.c:12)");
  CHECK(t[1].frames[3].Render() == "??");
  RankStack s;
  s.threads = t;
  CHECK(s.Main() == &s.threads[1]);
}

TEST_CASE("a 1 MB symbol in gdb's or faulthandler's text is parsed, cut, and never crashes dlaunch", "[stacks]") {
  // std::regex recursed once per character: a C++ template symbol this long
  // overflowed dlaunch's stack (SIGSEGV), and the job died with it (issue 18).
  const std::string symbol = "ns::f<" + std::string(1 << 20, 'T') + ">";
  std::string gdb = "Thread 1 (Thread 0x7f1a (LWP 4242) \"" + std::string(1 << 20, 'n') + "\"):\n" +
                    "#0  0x00007f1c in " + symbol + " (x=" + std::string(1 << 20, '(') + ") at /src/t.cpp:7\n" +
                    "#1  0x000055 in main () at /src/app.c:12\n";
  std::vector<ThreadStack> t = ParseGdb(gdb, 4242);
  REQUIRE(t.size() == 1);
  CHECK(t[0].main);
  CHECK(t[0].name.size() == kMaxStackText);
  REQUIRE(t[0].frames.size() == 2);
  CHECK(t[0].frames[0].function == symbol.substr(0, kMaxStackText));
  CHECK(t[0].frames[0].file == "t.cpp");
  CHECK(t[0].frames[0].line == 7);
  CHECK(t[0].frames[1].Render() == "main (app.c:12)");

  std::string py = "Current thread 0x1 (most recent call first):\n  File \"/w/" + std::string(1 << 20, 'f') +
                   ".py\", line 3 in " + std::string(1 << 20, 'g') + "\n  File \"/w/train.py\", line 88 in step\n";
  std::vector<ThreadStack> f = ParseFaulthandler(py);
  REQUIRE(f.size() == 1);
  REQUIRE(f[0].frames.size() == 2);
  CHECK(f[0].frames[0].function.size() == kMaxStackText);
  CHECK(f[0].frames[0].file.size() == kMaxStackText);
  CHECK(f[0].frames[0].line == 3);
  CHECK(f[0].frames[1].Render() == "step (train.py:88)");
  // A line of nothing but separators is no frame, and is read once.
  std::string seps = "Current thread 0x1 (most recent call first):\n  File \"";
  for (int i = 0; i < 100000; ++i) seps += "\", line ";
  CHECK(ParseFaulthandler(seps)[0].frames.empty());
}

TEST_CASE("frames the old patterns got wrong or threw on", "[stacks]") {
  // A line number past int: no std::out_of_range, the line is unknown.
  std::vector<ThreadStack> f = ParseFaulthandler(
      "Current thread 0x1 (most recent call first):\n  File \"/w/a.py\", line 99999999999999 in step\n");
  REQUIRE(f[0].frames.size() == 1);
  CHECK(f[0].frames[0].Render() == "step (a.py)");
  // A path that holds the separator: the last one ends it.
  f = ParseFaulthandler("Thread 0x1 (most recent call first):\n  File \"/w/x\", line 1 in y.py\", line 5 in run\n");
  REQUIRE(f[0].frames.size() == 1);
  CHECK(f[0].frames[0].Render() == "run (x\", line 1 in y.py:5)");
  // C++ names hold spaces; arguments hold parentheses.
  std::vector<ThreadStack> g = ParseGdb(
      "#0  0x1 in std::vector<int, std::allocator<int> >::push_back (this=0x1, v=(int &) @0x2: 3) at "
      "stl_vector.h:1281\n"
      "#1  0x2 in run(int) () from /usr/lib/libx.so\n"
      "#2  not a frame\n"
      "#3  0x3 in f (a=1) at /dir with space/x.c:4\n",
      1);
  REQUIRE(g.size() == 1);
  REQUIRE(g[0].frames.size() == 2);
  CHECK(g[0].frames[0].Render() == "std::vector<int, std::allocator<int> >::push_back (stl_vector.h:1281)");
  CHECK(g[0].frames[1].Render() == "run(int) (libx.so)");
  CHECK(ParseGdb("Thread 2 (LWP 99999999999999)\n", 1).size() == 1);
}

TEST_CASE("the hook's header: the main thread's ident and the descriptor it writes on", "[stacks]") {
  std::optional<HookHeader> h = ParseHookHeader("dlaunch: main thread 0x00007f0d3a1b7040 fd 3");
  REQUIRE(h);
  CHECK(h->main_ident == "0x00007f0d3a1b7040");
  CHECK(h->fd == 3);
  CHECK_FALSE(ParseHookHeader("dlaunch: main thread 0x00007f0d3a1b7040"));  // the hook before issue 18
  CHECK_FALSE(ParseHookHeader("dlaunch: main thread 0x1 fd -1"));
  CHECK_FALSE(ParseHookHeader("dlaunch: main thread 0x1 fd 99999999999"));
  CHECK_FALSE(ParseHookHeader("Thread 0x1 (most recent call first):"));
}

TEST_CASE("rank lists are written as ranges", "[stacks]") {
  CHECK(RankRanges({}) == "");
  CHECK(RankRanges({3}) == "3");
  CHECK(RankRanges({7, 0, 1, 2, 4, 5, 6}) == "0-2,4-7");
  CHECK(RankRanges({1, 1, 3, 5, 6}) == "1,3,5-6");
}

TEST_CASE("the hang summary groups ranks by where their main thread is and names the odd one out", "[stacks]") {
  std::string collective = Dump("/t/distributed_c10d.py", 1541, "all_reduce");
  std::string loader = Dump("/w/data.py", 42, "load_batch");

  SECTION("all in one place") {
    std::vector<RankStack> s = {Python(0, collective), Python(1, collective)};
    CHECK(HangSummary(s) ==
          std::vector<std::string>{
              "hang: ranks 0-1 (2) wait in all_reduce (distributed_c10d.py:1541) <- step (train.py:88)"});
    CHECK(OddRanks(s).empty());
  }
  SECTION("one rank elsewhere") {
    std::vector<RankStack> s;
    for (int r = 0; r < 8; ++r) s.push_back(Python(r, r == 3 ? loader : collective));
    CHECK(HangSummary(s) ==
          std::vector<std::string>{
              "hang: ranks 0-2,4-7 (7) wait in all_reduce (distributed_c10d.py:1541) <- step (train.py:88)",
              "hang: rank 3 (1) is elsewhere: load_batch (data.py:42) <- step (train.py:88)   <- odd one out"});
    CHECK(OddRanks(s) == std::vector<int>{3});
  }
  SECTION("two halves: nobody is the odd one out") {
    std::vector<RankStack> s = {Python(0, collective), Python(1, loader), Python(2, collective), Python(3, loader)};
    std::vector<std::string> lines = HangSummary(s);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] == "hang: ranks 0,2 (2) wait in all_reduce (distributed_c10d.py:1541) <- step (train.py:88)");
    CHECK(lines[1] == "hang: ranks 1,3 (2) are elsewhere: load_batch (data.py:42) <- step (train.py:88)");
    CHECK(OddRanks(s).empty());
  }
  SECTION("a rank that could not be sampled is named") {
    RankStack gone;
    gone.rank = 1;
    gone.pid = 77;
    gone.error = "no stack within 10.0s";
    std::vector<RankStack> s = {Python(0, collective), gone};
    std::vector<std::string> lines = HangSummary(s);
    REQUIRE(lines.size() == 2);
    CHECK(lines[1] == "hang: rank 1 (pid 77): not sampled (no stack within 10.0s)");
    CHECK(FullStacks(s).find("=== rank 1 (pid 77): not sampled (no stack within 10.0s)\n") != std::string::npos);
    CHECK(FullStacks(s).find("=== rank 0 (pid 1000), by python\nCurrent thread") != std::string::npos);
  }
  SECTION("depth: how many frames make a place") {
    std::vector<RankStack> s = {Python(0, collective), Python(1, Dump("/t/distributed_c10d.py", 1541, "all_reduce"))};
    CHECK(HangSummary(s, 1) ==
          std::vector<std::string>{"hang: ranks 0-1 (2) wait in all_reduce (distributed_c10d.py:1541)"});
  }
}

TEST_CASE("a rank's stack survives JSON both ways", "[stacks][bounds]") {
  RankStack s = Python(3, kPythonDump);
  s.pid = 4242;
  boost::json::value v = boost::json::parse(boost::json::serialize(ToJson(s)));
  Result<RankStack> back = RankStackFromJson(v);
  REQUIRE(back.ok());
  CHECK(back->rank == 3);
  CHECK(back->pid == 4242);
  CHECK(back->how == "python");
  CHECK(back->raw == s.raw);
  REQUIRE(back->threads.size() == 2);
  CHECK(back->threads[1].main);
  CHECK(back->threads[1].name == "Current thread 0x00007f0d3a1b7040");
  REQUIRE(back->threads[1].frames.size() == 4);
  CHECK(back->threads[1].frames[1].Render() == "step (train.py:88)");
  CHECK(HangSummary({*back}) == HangSummary({s}));

  SECTION("a rank that was not sampled keeps its reason") {
    RankStack gone;
    gone.rank = 1;
    gone.pid = 77;
    gone.error = "no stack within 10.0s";
    Result<RankStack> g = RankStackFromJson(ToJson(gone));
    REQUIRE(g.ok());
    CHECK(g->error == "no stack within 10.0s");
    CHECK(g->threads.empty());
  }
  SECTION("bytes that are not UTF-8, and oversized parts, are made safe and cut so that they still come back") {
    RankStack big = s;
    big.raw = std::string(kMaxStackRaw + 10, 'x') + "\xff";
    big.threads[0].frames[0].function = "bad \xc3\x28 \x1b[31m";
    big.threads.resize(kMaxStackThreads + 5, big.threads[0]);
    Result<RankStack> b = RankStackFromJson(boost::json::parse(boost::json::serialize(ToJson(big))));
    REQUIRE(b.ok());
    CHECK(b->raw.size() == kMaxStackRaw);
    CHECK(b->threads.size() == kMaxStackThreads);
    CHECK(b->threads[0].frames[0].function == "bad ?( ?[31m");
  }
}

TEST_CASE("a hostile stack document is refused with one line, never thrown or taken whole", "[stacks][bounds]") {
  auto Refusal = [](const char* json) {
    Result<RankStack> r = RankStackFromJson(boost::json::parse(json));
    REQUIRE_FALSE(r.ok());
    return r.status().message();
  };
  CHECK(Refusal("[]") == "stack: not an object");
  CHECK(Refusal("{}") == "stack.rank: missing");
  CHECK(Refusal(R"({"rank": "3"})") == "stack.rank: not an integer from 0 to 2147483647");
  CHECK(Refusal(R"({"rank": -1})") == "stack.rank: not an integer from 0 to 2147483647");
  CHECK(Refusal(R"({"rank": 1e3})") == "stack.rank: not an integer from 0 to 2147483647");
  CHECK(Refusal(R"({"rank": 99999999999})") == "stack.rank: not an integer from 0 to 2147483647");
  CHECK(Refusal(R"({"rank": 18446744073709551615})") == "stack.rank: not an integer from 0 to 2147483647");
  CHECK(Refusal(R"({"rank": 1})") == "stack of rank 1.pid: missing");
  CHECK(Refusal(R"({"rank": 1, "pid": 2})") == "stack of rank 1.threads: not an array");
  CHECK(Refusal(R"({"rank": 1, "pid": 2, "threads": {}})") == "stack of rank 1.threads: not an array");
  CHECK(Refusal(R"({"rank": 1, "pid": 2, "how": 5, "threads": []})") == "stack of rank 1.how: not a string");
  CHECK(Refusal(R"({"rank": 1, "pid": 2, "threads": [7]})") == "stack of rank 1.threads[0]: not an object");
  CHECK(Refusal(R"({"rank": 1, "pid": 2, "threads": [{"main": 1, "frames": []}]})") ==
        "stack of rank 1.threads[0].main: not a boolean");
  CHECK(Refusal(R"({"rank": 1, "pid": 2, "threads": [{"frames": [{"function": "f", "line": -4}]}]})") ==
        "stack of rank 1.threads[0].frames[0].line: not an integer from 0 to 2147483647");
  CHECK(Refusal(R"({"rank": 1, "pid": 2, "threads": [{"frames": [null]}]})") ==
        "stack of rank 1.threads[0].frames[0]: not an object");
  std::string long_name =
      R"({"rank": 1, "pid": 2, "threads": [{"name": ")" + std::string(kMaxStackText + 1, 'n') + R"(", "frames": []}]})";
  CHECK(Refusal(long_name.c_str()) == "stack of rank 1.threads[0].name: 4097 bytes, more than 4096");
  boost::json::array many(kMaxStackThreads + 1, boost::json::object{{"frames", boost::json::array{}}});
  boost::json::value v = boost::json::object{{"rank", 0}, {"pid", 1}, {"threads", many}};
  Result<RankStack> r = RankStackFromJson(v);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "stack of rank 0.threads: 1025, more than 1024");
}

}  // namespace dlaunch::launcher
