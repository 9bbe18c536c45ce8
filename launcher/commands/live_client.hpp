// `dlaunch status` and `dlaunch stacks`: the client of the live view
// (launcher/live/live.hpp). It asks every matching socket in the per-user
// directory, prints, and exits; it never waits on a job longer than a bounded
// time per request.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "envmap/layout.hpp"
#include "launcher/config/live_options.hpp"

namespace dlaunch::launcher {

// Runs the command; returns 0 when shown, 1 when there is no such job (one line
// on stderr), 2 for bad input.
int RunLiveClient(const LivePlan& plan, const envmap::EnvMap& env);

// The status table of `rows` (WorkerRun::Rows of every node, sorted by rank),
// each line cut to `width` columns (0: not cut). Pure, for tests.
std::string StatusTable(const boost::json::array& rows, size_t width);
// The documents to show: a job-wide one ("job_wide": true, from the process
// hosting a job's coordinator) replaces every other of its run id, so that no
// rank shows twice when a node's own socket is on the same machine. Pure.
std::vector<boost::json::object> PreferJobWide(std::vector<boost::json::object> docs);
// The listing of jobs (one status document per dlaunch).
std::string JobTable(const std::vector<boost::json::object>& docs, size_t width);

}  // namespace dlaunch::launcher
