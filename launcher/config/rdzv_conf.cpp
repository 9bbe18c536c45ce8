#include "launcher/config/rdzv_conf.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

Status Bad(const std::string& what, const std::string& value) {
  return Status::InvalidArgument(fmt::format("--rdzv-conf: expected {}, got '{}'", what, Printable(value)));
}

// Keys torchrun's c10d and etcd backends read: accepted for compatibility, and
// ignored without a word (dlaunch's rendezvous has no use for them).
constexpr std::string_view kTorchrunConfKeys[] = {"read_timeout",
                                                  "timeout",
                                                  "close_timeout",
                                                  "keep_alive_interval",
                                                  "keep_alive_max_attempt",
                                                  "use_libuv",
                                                  "store_type",
                                                  "protocol",
                                                  "cacert",
                                                  "cert",
                                                  "key"};
constexpr std::string_view kOurConfKeys[] = {"is_host", "join_timeout", "last_call_timeout", "heartbeat_timeout"};

// A value that arrives wrapped in one pair of quotes, as exec-form YAML passes
// `--rdzv-conf='join_timeout=5'` (no shell removes them): the quotes go. A
// dlaunch extension; torchrun would read the key "'join_timeout" and ignore it.
std::string Unquoted(const std::string& v) {
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front())
    return v.substr(1, v.size() - 2);
  return v;
}

}  // namespace

Status SetRdzvConf(Options& o, const std::string& quoted) {
  std::string v = Unquoted(quoted);
  std::vector<std::string> ignored;
  for (const std::string& pair : Split(v, ',')) {
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key = pair.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (key == "is_host") {
      if (value != "0" && value != "1" && value != "true" && value != "false")
        return Bad("is_host=0 or is_host=1", pair);
      o.is_host = value == "1" || value == "true";
      continue;
    }
    std::chrono::milliseconds* field = key == "join_timeout"        ? &o.join_timeout
                                       : key == "last_call_timeout" ? &o.last_call_timeout
                                       : key == "heartbeat_timeout" ? &o.heartbeat_timeout
                                                                    : nullptr;
    if (field == nullptr) {
      if (std::find(std::begin(kTorchrunConfKeys), std::end(kTorchrunConfKeys), key) != std::end(kTorchrunConfKeys))
        continue;
      // torchrun ignores keys its backend does not read, and so does dlaunch,
      // but a near miss of a key dlaunch reads is refused: ignored, it would
      // silently change the job (is_hots=1 would leave the host to be guessed).
      for (std::string_view known : kOurConfKeys)
        if (EditDistance(key, known) <= 2)
          return Status::InvalidArgument(
              fmt::format("--rdzv-conf: unknown key '{}' (did you mean '{}'?)", Printable(key), known));
      ignored.push_back(fmt::format("'{}'", Printable(key)));
      continue;
    }
    std::optional<std::chrono::milliseconds> t = ParseSeconds(value, /*allow_zero=*/false);
    if (!t)
      return Bad(fmt::format("{}=SECONDS (positive, at most {})", key, static_cast<long long>(kMaxSeconds)), pair);
    *field = *t;
  }
  if (!ignored.empty())
    o.warnings.push_back(fmt::format("--rdzv-conf: ignoring {} {} (dlaunch reads {})",
                                     ignored.size() == 1 ? "key" : "keys", fmt::join(ignored, ", "),
                                     fmt::join(kOurConfKeys, ", ")));
  return Status::Ok();
}

}  // namespace dlaunch::launcher
