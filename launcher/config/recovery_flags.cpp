#include "launcher/config/recovery_flags.hpp"

#include <cmath>

#include <fmt/format.h>

#include "base/defaults.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/core/text.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {
namespace {

Status BackoffError(std::string_view value) {
  return Status::InvalidArgument(
      fmt::format("--restart-backoff: expected MIN:MAX seconds with MIN <= MAX, got '{}'", PrintablePrefix(value, 64)));
}

// One side of MIN:MAX: a number of seconds from 0 to kMaxSeconds.
Result<std::chrono::milliseconds> BackoffSeconds(std::string_view part, std::string_view value) {
  std::optional<std::chrono::milliseconds> t = ParseSeconds(part, /*allow_zero=*/true);
  if (t) return *t;
  std::optional<double> n = ParseDouble(part);
  if (n && std::isfinite(*n) && *n > kMaxSeconds)
    return Status::InvalidArgument(fmt::format("--restart-backoff: {} seconds is over the limit of {}, got '{}'",
                                               Printable(part), static_cast<long long>(kMaxSeconds),
                                               PrintablePrefix(value, 64)));
  return BackoffError(value);
}

// "10s", "1.5s", "5m": a wait for --explain.
std::string Duration(std::chrono::milliseconds t) {
  if (t.count() % 60'000 == 0 && t.count() >= 60'000) return fmt::format("{}m", t.count() / 60'000);
  return SecondsText(t);
}

}  // namespace

Result<int> ParseMaxNoProgressRestarts(std::string_view value) {
  std::optional<int> n = ParseInt(value);
  // 0 would mean nothing: the first failure has no earlier one to compare with.
  if (!n || *n < 1)
    return Status::InvalidArgument(
        fmt::format("--max-no-progress-restarts: expected a positive number, got '{}'", PrintablePrefix(value, 64)));
  return *n;
}

Result<RecoveryFlags> ParseRestartBackoff(std::string_view value) {
  size_t colon = value.find(':');
  if (colon == std::string_view::npos) return BackoffError(value);
  Result<std::chrono::milliseconds> lo = BackoffSeconds(value.substr(0, colon), value);
  if (!lo.ok()) return lo.status();
  Result<std::chrono::milliseconds> hi = BackoffSeconds(value.substr(colon + 1), value);
  if (!hi.ok()) return hi.status();
  if (*lo > *hi) return BackoffError(value);
  // A wait of 0 that doubles stays 0: MAX would never be reached.
  if (lo->count() == 0 && hi->count() > 0)
    return Status::InvalidArgument(fmt::format(
        "--restart-backoff: MIN must be above 0 when MAX is (0:0 restarts at once), got '{}'", Printable(value)));
  RecoveryFlags f;
  f.backoff_min = *lo;
  f.backoff_max = *hi;
  return f;
}

Result<int> ParseSpares(std::string_view value) {
  std::optional<int> n = ParseInt(value);
  if (!n || *n < 0 || *n > rendezvous::kMaxSpares) {
    return Status::InvalidArgument(fmt::format("--spares: expected a number from 0 to {}, got '{}'",
                                               rendezvous::kMaxSpares, PrintablePrefix(value, 64)));
  }
  return *n;
}

Result<RecoveryFlags> ReadRecoveryFlags(const Options& options) {
  RecoveryFlags f;
  for (const auto& [name, value] : options.typed) {
    if (name == "max-no-progress-restarts") {
      Result<int> k = ParseMaxNoProgressRestarts(value);
      if (!k.ok()) return k.status();
      f.max_no_progress_restarts = *k;
    } else if (name == "spares") {
      Result<int> n = ParseSpares(value);
      if (!n.ok()) return n.status();
      f.spares = *n;
    } else if (name == "restart-backoff") {
      Result<RecoveryFlags> b = ParseRestartBackoff(value);
      if (!b.ok()) return b.status();
      f.backoff_min = b->backoff_min;
      f.backoff_max = b->backoff_max;
    }
  }
  return f;
}

std::string ExplainRecovery(int max_restarts, const RecoveryFlags& flags) {
  bool backoff = flags.backoff_max.count() > 0;
  if (flags.max_no_progress_restarts < 0 && !backoff) return {};
  std::string out = fmt::format("restarts: up to {} (--max-restarts)", max_restarts);
  if (flags.max_no_progress_restarts >= 0)
    out += fmt::format("; stop after {} in a row without progress, exit code {} (--max-no-progress-restarts)",
                       flags.max_no_progress_restarts, base::kExitNoProgress);
  if (backoff)
    out += fmt::format("; wait {} before each, doubling up to {} (--restart-backoff)", Duration(flags.backoff_min),
                       Duration(flags.backoff_max));
  return out;
}

}  // namespace dlaunch::launcher
