// The metrics dlaunch serves at /metrics (--metrics-addr), in Prometheus's text
// exposition format 0.0.4: the one table of every metric (its name, type, labels,
// where it is served and what it means), and a pure writer of that format. The
// metric list in docs/monitoring.md is generated from the same table
// (MetricsMarkdown; `dlaunch-docgen metrics`), and a unit test holds it to it.
//
// Names follow Prometheus's rules: a `dlaunch_` prefix, the unit in the name
// (`_seconds`, `_bytes`), `_total` on every counter and on no gauge, and labels
// of low cardinality (a rank, a state out of a fixed set; never a host name, a
// pid or a line of output). Nothing here reads a clock, /proc or a socket.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlaunch::launcher {

enum class MetricType { kGauge, kCounter };

// Which dlaunch serves a metric.
enum class MetricWhere {
  kLauncher,     // every launcher (single node, static, a rendezvous node)
  kHost,         // the launcher that hosts its job's coordinator, and `dlaunch coordinator`
  kCoordinator,  // `dlaunch coordinator` only
  kEvery,        // every dlaunch that serves metrics
};

struct MetricDef {
  const char* name;
  MetricType type;
  const char* labels;  // comma-separated label names, "" for none
  MetricWhere where;
  const char* help;  // the HELP line and the docs' meaning
};

// Every metric, in the order /metrics and docs/monitoring.md list them.
const std::vector<MetricDef>& MetricTable();
// The row named `name`; null when none.
const MetricDef* FindMetric(std::string_view name);

// The states of dlaunch_rank_state's `state` label: every rank has one series
// per state, 1 for the one it is in.
// (Whether a running rank is stopped or asleep is /proc's to say, which a
// scrape does not read: `dlaunch status` shows it.)
inline constexpr const char* kRankStates[] = {"not_started", "running", "exited", "killed"};

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool ValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, and not starting with "__" (reserved).
bool ValidLabelName(std::string_view name);
// A label value as the format quotes it: backslash, double quote and line feed escaped.
std::string EscapeLabelValue(std::string_view value);
// A HELP text: backslash and line feed escaped.
std::string EscapeHelp(std::string_view text);
// A sample value: integers as integers ("3", "-1"), others with up to 17
// significant digits, and "NaN", "+Inf", "-Inf".
std::string FormatSampleValue(double value);

using Labels = std::vector<std::pair<std::string, std::string>>;

// One scrape's samples, written in the table's order with one HELP and one TYPE
// line per metric that has a sample. Add() takes only names of the table with
// its labels, in its order: anything else is a programmer error, and throws
// std::logic_error (a unit test walks every call site's metric).
class Exposition {
 public:
  void Add(std::string_view name, double value, Labels labels = {});
  // The text/plain; version=0.0.4 body, ending in a line feed.
  std::string Text() const;

 private:
  struct Sample {
    const MetricDef* def;
    Labels labels;
    double value;
  };
  std::vector<Sample> samples_;
};

// The HTTP Content-Type of Text().
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

// docs/monitoring.md's metric list: a Markdown table of name, type, labels, where, meaning.
std::string MetricsMarkdown();

}  // namespace dlaunch::launcher
