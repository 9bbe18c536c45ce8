// The `dlaunch status` client: its table, and the host's job-wide reply
// preferred to a node's own.
#include "launcher/commands/live_client.hpp"

#include <string>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {

TEST_CASE("the status table: one row per rank, the last line cut to the width", "[live]") {
  boost::json::array rows{boost::json::object{{"rank", 0},
                                              {"local_rank", 0},
                                              {"node_rank", 0},
                                              {"host", "n1"},
                                              {"pid", 4242},
                                              {"state", "sleeping"},
                                              {"run_time_s", 75.5},
                                              {"cpu_pct", 97.0},
                                              {"rss_kib", 2048},
                                              {"restarts", 1},
                                              {"silent_s", 3.7},
                                              {"last_line", "epoch 3 loss 0.41"}},
                          boost::json::object{{"rank", 1},
                                              {"local_rank", 1},
                                              {"node_rank", 0},
                                              {"host", "n1"},
                                              {"pid", 0},
                                              {"state", "exited (3)"},
                                              {"run_time_s", 2.0},
                                              {"cpu_pct", 0.0},
                                              {"rss_kib", 0},
                                              {"restarts", 1},
                                              {"silent_s", 0.0},
                                              {"last_line", ""}}};
  std::string table = StatusTable(rows, 0);
  CHECK(table ==
        "NODE  HOST  RANK  LOCAL   PID  STATE       TIME  CPU%   RSS  RESTARTS  SILENT  LAST LINE\n"
        "   0  n1       0      0  4242  sleeping    1:15  97.0  2.0M         1      3s  epoch 3 loss 0.41\n"
        "   0  n1       1      1     -  exited (3)  0:02   0.0     -         1      0s  \n");
  CHECK(StatusTable(rows, 88).find("  epoch 3 l\n") != std::string::npos);  // 79 columns before it
  // Several programs: each rank's role in a column of its own.
  rows[0].as_object()["role"] = "trainer";
  rows[1].as_object()["role"] = "rollout";
  CHECK(StatusTable(rows, 0) ==
        "NODE  HOST  RANK  ROLE     LOCAL   PID  STATE       TIME  CPU%   RSS  RESTARTS  SILENT  LAST LINE\n"
        "   0  n1       0  trainer      0  4242  sleeping    1:15  97.0  2.0M         1      3s  epoch 3 loss 0.41\n"
        "   0  n1       1  rollout      1     -  exited (3)  0:02   0.0     -         1      0s  \n");
}

TEST_CASE("job live: the client prefers the job-wide reply of a run id", "[job_live]") {
  auto doc = [](const std::string& id, int pid, bool wide) {
    boost::json::object o{{"run_id", id}, {"pid", pid}};
    if (wide) o["job_wide"] = true;
    return o;
  };
  std::vector<boost::json::object> docs = {doc("x", 1, false), doc("x", 2, true), doc("y", 3, false), doc("x", 4, true),
                                           doc("y", 5, false)};
  std::vector<boost::json::object> out = PreferJobWide(docs);
  REQUIRE(out.size() == 3);
  CHECK(out[0].at("pid").as_int64() == 2);
  CHECK(out[1].at("pid").as_int64() == 3);
  CHECK(out[2].at("pid").as_int64() == 5);
}

}  // namespace dlaunch::launcher
