#include "launcher/config/torchrun_flags.hpp"

#include <algorithm>

namespace dlaunch::launcher {

namespace {

constexpr std::string_view kTorch113[] = {
    "nnodes",       "nproc_per_node",   "rdzv_backend", "rdzv_endpoint", "rdzv_id",     "rdzv_conf",   "standalone",
    "max_restarts", "monitor_interval", "start_method", "role",          "module",      "no_python",   "run_path",
    "log_dir",      "redirects",        "tee",          "node_rank",     "master_addr", "master_port",
};

constexpr std::string_view kTorch2[] = {
    "nnodes",
    "nproc-per-node",
    "rdzv-backend",
    "rdzv-endpoint",
    "rdzv-id",
    "rdzv-conf",
    "standalone",
    "max-restarts",
    "monitor-interval",
    "start-method",
    "event-log-handler",
    "role",
    "module",
    "no-python",
    "run-path",
    "log-dir",
    "redirects",
    "tee",
    "local-ranks-filter",
    "duplicate-stdout-filters",
    "duplicate-stderr-filters",
    "node-rank",
    "master-addr",
    "master-port",
    "local-addr",
    "logs-specs",
    "numa-binding",
    "signals-to-handle",
    "shutdown-timeout",
    "virtual-local-rank",
};

std::string Dashed(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

}  // namespace

std::span<const std::string_view> Torch113Flags() { return kTorch113; }
std::span<const std::string_view> Torch2Flags() { return kTorch2; }

bool IsTorchrunFlag(std::string_view name) {
  for (std::span<const std::string_view> list : {Torch113Flags(), Torch2Flags()})
    for (std::string_view f : list)
      if (Dashed(f) == name) return true;
  return false;
}

std::vector<std::string> FlagsWithPrefix(std::string_view prefix, const std::vector<std::string>& ours) {
  std::vector<std::string> out;
  auto add = [&](std::string_view name) {
    std::string dashed = Dashed(name);
    if (dashed.starts_with(prefix)) out.push_back(std::move(dashed));
  };
  for (std::span<const std::string_view> list : {Torch113Flags(), Torch2Flags()})
    for (std::string_view f : list) add(f);
  for (const std::string& f : ours) add(f);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace dlaunch::launcher
