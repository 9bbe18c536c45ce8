#include "launcher/metrics/prometheus.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

namespace dlaunch::launcher {

// A table, not logic: one row a metric.
const std::vector<MetricDef>& MetricTable() {
  using enum MetricType;
  using enum MetricWhere;
  static const std::vector<MetricDef> table = {
      {"dlaunch_job_info", kGauge, "run_id,mode", kLauncher,
       "always 1; the job's run id and mode (single-node, static, rendezvous)"},
      {"dlaunch_ready", kGauge, "", kLauncher,
       "1 while /readyz answers 200: this node's workers of the current generation run"},
      {"dlaunch_world_size", kGauge, "", kLauncher,
       "the job's WORLD_SIZE (0 before a rendezvous job's first assignment)"},
      {"dlaunch_ranks_running", kGauge, "", kLauncher,
       "this node's ranks whose process runs (sum over the job's targets for the job)"},
      {"dlaunch_rank_state", kGauge, "rank,state", kLauncher,
       "1 for the state a rank of this node is in, 0 for the others: not_started, running, exited, killed"},
      {"dlaunch_rank_exit_code", kGauge, "rank", kLauncher,
       "a rank's last exit code (128+N for signal N); absent while it has not exited"},
      {"dlaunch_rank_silent_seconds", kGauge, "rank", kLauncher,
       "seconds since a rank last wrote output (0 while the console holds its output back)"},
      {"dlaunch_rank_restarts_total", kCounter, "rank", kLauncher,
       "restarts of a rank: the job's restarts before this run plus its own"},
      {"dlaunch_rank_info", kGauge, "rank,role", kLauncher,
       "1 for each rank of this node, labelled with its role (ROLE_NAME: its group's with several programs)"},
      {"dlaunch_restarts_total", kCounter, "", kLauncher,
       "restarts of this node's worker group (--max-restarts), or the job's restart count in a rendezvous"},
      {"dlaunch_hangs_detected_total", kCounter, "", kLauncher,
       "hangs reported: no rank wrote a line for --hang-timeout (on a multi-node job, counted by the host)"},
      {"dlaunch_stacks_taken_total", kCounter, "", kLauncher,
       "stack collections saved to a stacks-N.txt file (hangs, and workers killed after a failure)"},
      {"dlaunch_health_check_failures_total", kCounter, "", kLauncher,
       "--health-check runs that failed on this node (a code other than 0, a signal, the timeout)"},
      {"dlaunch_node_held_out", kGauge, "", kLauncher,
       "1 while this node's last --health-check failed and it is held out of the job, else 0"},
      {"dlaunch_rank_sync_share", kGauge, "rank", kLauncher,
       "share of a rank's time at the synchronisation point in the straggler watch's last window (0 to 1; on a "
       "multi-node job, every rank on the host): the straggler's is markedly lower"},
      {"dlaunch_stragglers", kGauge, "", kLauncher,
       "ranks and nodes the straggler watch names now as holding the others back"},
      {"dlaunch_stragglers_named_total", kCounter, "", kLauncher, "stragglers named since the job started"},
      {"dlaunch_nodes_joined_total", kCounter, "", kHost, "agents that proved the token and joined a job"},
      {"dlaunch_nodes_lost_total", kCounter, "", kHost, "nodes a job lost: closed connection or no heartbeat"},
      {"dlaunch_spares", kGauge, "", kHost, "agents waiting as spares (--spares) to replace a lost node"},
      {"dlaunch_rendezvous_attempts_total", kCounter, "", kHost,
       "rendezvous hellos received: every agent's attempt to join, refused or not"},
      {"dlaunch_auth_refusals_total", kCounter, "", kHost, "rendezvous attempts refused for a missing or wrong token"},
      {"dlaunch_coordinator_jobs", kGauge, "", kCoordinator, "jobs the coordinator holds now"},
      {"dlaunch_event_loop_lag_seconds", kGauge, "", kEvery,
       "how late dlaunch's event loop ran its last tick (one every 2 s); /healthz is 503 above 2"},
      {"process_resident_memory_bytes", kGauge, "", kEvery, "dlaunch's own resident memory"},
      {"process_open_fds", kGauge, "", kEvery, "dlaunch's own open file descriptors"},
      {"process_cpu_seconds_total", kCounter, "", kEvery, "dlaunch's own CPU time, user and system"},
  };
  return table;
}

const MetricDef* FindMetric(std::string_view name) {
  for (const MetricDef& d : MetricTable())
    if (name == d.name) return &d;
  return nullptr;
}

namespace {

bool NameChar(char c, bool first, bool colon) {
  bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool ValidName(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!NameChar(name[i], i == 0, colon)) return false;
  return true;
}

// The label names of `def`, split at commas.
std::vector<std::string_view> LabelNames(const MetricDef& def) {
  std::vector<std::string_view> out;
  std::string_view rest = def.labels;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    out.push_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

const char* TypeWord(MetricType t) { return t == MetricType::kCounter ? "counter" : "gauge"; }

const char* WhereWord(MetricWhere w) {
  switch (w) {
    case MetricWhere::kLauncher:
      return "launcher";
    case MetricWhere::kHost:
      return "host, coordinator";
    case MetricWhere::kCoordinator:
      return "coordinator";
    case MetricWhere::kEvery:
      return "every";
  }
  return "";
}

}  // namespace

bool ValidMetricName(std::string_view name) { return ValidName(name, true); }

bool ValidLabelName(std::string_view name) { return ValidName(name, false) && name.substr(0, 2) != "__"; }

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string EscapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) return fmt::format("{}", static_cast<long long>(value));
  return fmt::format("{}", value);  // the shortest text that reads back as the same double
}

void Exposition::Add(std::string_view name, double value, Labels labels) {
  const MetricDef* def = FindMetric(name);
  if (def == nullptr) throw std::logic_error(fmt::format("metric {}: not in the metric table", name));
  std::vector<std::string_view> names = LabelNames(*def);
  bool same = names.size() == labels.size();
  for (size_t i = 0; same && i < names.size(); ++i) same = names[i] == labels[i].first;
  if (!same) throw std::logic_error(fmt::format("metric {}: labels differ from the table's '{}'", name, def->labels));
  samples_.push_back(Sample{def, std::move(labels), value});
}

std::string Exposition::Text() const {
  // The samples in the table's order (the table is one vector, so its rows'
  // addresses are in its order), each metric's own in the order added: one pass
  // into one buffer, since a scrape a second makes this a hot path.
  std::vector<const Sample*> order;
  order.reserve(samples_.size());
  for (const Sample& s : samples_) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const Sample* a, const Sample* b) { return a->def < b->def; });
  fmt::memory_buffer out;
  auto to = std::back_inserter(out);
  const MetricDef* last = nullptr;
  for (const Sample* s : order) {
    const MetricDef& def = *s->def;
    if (&def != last) {
      fmt::format_to(to, "# HELP {} {}\n# TYPE {} {}\n", def.name, EscapeHelp(def.help), def.name, TypeWord(def.type));
      last = &def;
    }
    fmt::format_to(to, "{}", def.name);
    if (!s->labels.empty()) {
      char sep = '{';
      for (const auto& [name, value] : s->labels) {
        fmt::format_to(to, "{}{}=\"{}\"", sep, name, EscapeLabelValue(value));
        sep = ',';
      }
      out.push_back('}');
    }
    fmt::format_to(to, " {}\n", FormatSampleValue(s->value));
  }
  return fmt::to_string(out);
}

std::string MetricsMarkdown() {
  std::string out = "| metric | type | labels | served by | meaning |\n|---|---|---|---|---|\n";
  for (const MetricDef& d : MetricTable()) {
    std::string labels = *d.labels ? fmt::format("`{}`", d.labels) : "";
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", d.name, TypeWord(d.type), labels, WhereWord(d.where), d.help);
  }
  return out;
}

}  // namespace dlaunch::launcher
