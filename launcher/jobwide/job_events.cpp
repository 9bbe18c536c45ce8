#include "launcher/jobwide/job_events.hpp"

namespace dlaunch::launcher {

void WriteJobEvents(rendezvous::CoordinatorServer& server, EventLog& events) {
  server.OnNodeLost([&events](const rendezvous::NodeLost& lost) {
    events.Emit("node_lost", {{"node", lost.node_rank}, {"host", lost.host}, {"reason", lost.what}});
  });
  server.OnJobEvent([&events](const rendezvous::JobEvent& event) { events.Emit(event.name, event.fields); });
}

}  // namespace dlaunch::launcher
