// TF_CONFIG: the cluster description TensorFlow's distribution strategies read.
#include <string>

#include <boost/json.hpp>

#include "envmap/host_port.hpp"
#include "envmap/worker_env.hpp"

namespace dlaunch::envmap {

namespace {

// Where global rank `rank` runs: its node's address and that task's own port.
std::string TaskAddress(const JobLayout& layout, int rank) {
  int offset = 0;
  for (const Node& node : layout.nodes) {
    if (rank < offset + node.nproc) {
      const size_t local = static_cast<size_t>(rank - offset);
      const int port = local < node.task_ports.size() ? node.task_ports[local] : 0;
      return JoinHostPort(node.addr, port);
    }
    offset += node.nproc;
  }
  return {};  // unreachable for a valid layout
}

}  // namespace

std::string TfConfig(const JobLayout& layout, const WorkerSlot& slot) {
  // Roles take consecutive global ranks in the order listed; remember where each starts.
  boost::json::object by_role;
  int first = 0;
  for (const RoleSpec& role : layout.roles) {
    boost::json::array tasks;
    for (int i = 0; i < role.count; ++i) tasks.emplace_back(TaskAddress(layout, first + i));
    by_role[role.name] = std::move(tasks);
    first += role.count;
  }

  // Written in TensorFlow's documented order rather than the order the user listed,
  // so the text is the same for "worker:2,chief:1" and "chief:1,worker:2". The
  // evaluator stays out: it is not part of the training cluster (Kubeflow does the same).
  boost::json::object cluster;
  for (const char* name : {"chief", "worker", "ps"}) {
    if (auto* tasks = by_role.if_contains(name)) cluster[name] = std::move(*tasks);
  }

  boost::json::object config;
  config["cluster"] = std::move(cluster);
  config["task"] = {{"type", slot.role}, {"index", slot.role_rank}};
  config["environment"] = "cloud";
  return boost::json::serialize(config);
}

}  // namespace dlaunch::envmap
