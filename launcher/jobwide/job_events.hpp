// What a coordinator hosted in this process tells of its nodes, into this
// process's --events file: node_lost and the recovery events (spares, standbys,
// renumbered ranks; rendezvous/coordinator.hpp's JobEvent). The rendezvous node
// that hosts the coordinator and a head launch's head both write them.
#pragma once

#include "launcher/core/events.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

// Hooks `server`'s node and job events to `events`; both must outlive the server's use of them.
void WriteJobEvents(rendezvous::CoordinatorServer& server, EventLog& events);

}  // namespace dlaunch::launcher
