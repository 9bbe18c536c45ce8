// Layouts shared by the envmap tests.
#pragma once

#include "envmap/layout.hpp"

namespace dlaunch::envmap::testing {

// Nodes of 2, 3 and 1 processes: ranks 0-1 on a, 2-4 on b, 5 on c.
inline JobLayout ThreeNodes(int node_rank) {
  JobLayout layout;
  layout.nodes = {{"a", "10.0.0.1", 2, {}}, {"b", "10.0.0.2", 3, {}}, {"c", "10.0.0.3", 1, {}}};
  layout.node_rank = node_rank;
  layout.master_addr = "10.0.0.1";
  layout.master_port = 29500;
  return layout;
}

}  // namespace dlaunch::envmap::testing
