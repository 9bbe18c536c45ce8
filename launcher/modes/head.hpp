// Head-node launch: `dlaunch --hostfile hosts.txt -- python train.py` (or -H
// n1:8,n2:8) on one machine starts the whole job. The head hosts the rendezvous
// coordinator on the address that routes to the nodes, starts one dlaunch agent
// per node through ssh (or pdsh, or a plain shell for localhost) with the node's
// rank, worker count and a fresh token, and relays every node's output whole-line.
//
// One failure anywhere, a node that cannot be reached, or a signal to the head
// ends the job on every node through the coordinator (Abort), so each agent
// tears its workers down itself; ssh connections are only killed when an agent
// does not finish within the shutdown timeout.
#pragma once

#include <string>
#include <vector>

#include "launcher/config/plan.hpp"
#include "launcher/modes/remote.hpp"

namespace dlaunch::launcher {

// The agent command line for node `node_rank` of the plan's hosts (pure; for
// tests too). `self` is dlaunch's path on the nodes, `endpoint` the
// coordinator's HOST:PORT.
AgentCommand AgentCommandFor(const HeadPlan& plan, int node_rank, const std::string& self, const std::string& endpoint,
                             const std::string& run_id, const std::string& cwd);

// Whether the agents get values of the user's that pdsh, which forwards no
// stdin, must put on their command lines: -x values, or a group's own -x
// values (inside DLAUNCH_PROGRAMS).
bool SendsUserValues(const HeadPlan& plan);

// --explain for a head-node launch: the nodes, their ranks and worker counts, and
// the command each would run (the token and the coordinator's port left as
// placeholders). Returns the exit code after printing.
int ExplainHead(const HeadPlan& plan);

// Runs the job from the head and returns its exit code: the job's (the first
// failure's code, 128+N for a signal), 1 when a node could not be started, 2 for
// bad input (one line naming it). `env` is the head's environment, which each
// node's launcher (ssh, pdsh, sh) inherits.
int RunHead(const HeadPlan& plan, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
