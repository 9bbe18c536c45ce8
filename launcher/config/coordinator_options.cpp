#include "launcher/config/coordinator_options.hpp"

namespace dlaunch::launcher {

rendezvous::CoordinatorOptions CoordinatorOptionsFor(const Options& o, const std::string& run_id, int min_nodes,
                                                     int max_nodes, int max_restarts, const std::string& token) {
  rendezvous::CoordinatorOptions c;
  c.run_id = run_id;
  c.min_nodes = min_nodes;
  c.max_nodes = max_nodes;
  c.max_restarts = max_restarts;
  c.join_timeout = o.join_timeout;
  c.last_call_timeout = o.last_call_timeout;
  c.heartbeat_timeout = o.heartbeat_timeout;
  c.token = token;
  c.master_port = o.master_port.value_or(0);
  return c;
}

}  // namespace dlaunch::launcher
