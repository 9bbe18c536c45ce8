#include "launcher/hostfile.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "launcher/text.hpp"

namespace dlaunch::launcher {
namespace {

// Whitespace-separated words of one line.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    size_t start = line.find_first_not_of(" \t\r", i);
    if (start == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t\r", start);
    if (end == std::string_view::npos) end = line.size();
    words.push_back(line.substr(start, end - start));
    i = end;
  }
  return words;
}

// "host" or "host:N".
Result<HostEntry> HostWord(std::string_view word, const std::string& where) {
  HostEntry e;
  size_t colon = word.rfind(':');
  if (colon == std::string_view::npos) {
    e.host = std::string(word);
    return e;
  }
  std::optional<int> n = ParseInt(word.substr(colon + 1));
  if (colon == 0 || !n || *n < 1) return Status::InvalidArgument(fmt::format("{}: expected HOST:SLOTS, got '{}'", where, word));
  e.host = std::string(word.substr(0, colon));
  e.slots = *n;
  return e;
}

// A host may be named once: a second line would silently change the node ranks.
Status AddUnique(std::vector<HostEntry>& hosts, std::map<std::string, std::string>& seen, HostEntry e,
                 const std::string& where) {
  auto [it, fresh] = seen.emplace(e.host, where);
  if (!fresh) return Status::InvalidArgument(fmt::format("{}: host '{}' is listed twice (first at {})", where, e.host, it->second));
  hosts.push_back(std::move(e));
  return Status::Ok();
}

// "0,2" for --include/--exclude.
Result<std::vector<int>> SlotList(std::string_view list, const std::string& flag, const std::string& spec) {
  std::vector<int> slots;
  for (const std::string& s : Split(list, ',')) {
    std::optional<int> n = ParseInt(s);
    if (!n || *n < 0) return Status::InvalidArgument(fmt::format("--{}: expected HOST[:SLOT,SLOT][@HOST...], got '{}'", flag, spec));
    slots.push_back(*n);
  }
  return slots;
}

}  // namespace

Result<std::vector<HostEntry>> ParseHostfile(std::string_view text, const std::string& name) {
  std::vector<HostEntry> hosts;
  std::map<std::string, std::string> seen;
  int line_no = 0;
  for (const std::string& raw : Split(text, '\n')) {
    ++line_no;
    std::string where = fmt::format("hostfile {}:{}", name, line_no);
    std::string_view line = raw;
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> words = Words(line);
    if (words.empty()) continue;
    Result<HostEntry> e = HostWord(words[0], where);
    if (!e.ok()) return e.status();
    for (size_t i = 1; i < words.size(); ++i) {
      std::string_view w = words[i];
      bool slots = w.starts_with("slots="), max_slots = w.starts_with("max_slots=") || w.starts_with("max-slots=");
      if (!slots && !max_slots) return Status::InvalidArgument(fmt::format("{}: expected 'slots=N', got '{}'", where, w));
      std::optional<int> n = ParseInt(w.substr(w.find('=') + 1));
      if (!n || *n < 1) return Status::InvalidArgument(fmt::format("{}: expected a positive count in '{}'", where, w));
      // max_slots is Open MPI's oversubscription cap; dlaunch never oversubscribes.
      if (slots) e->slots = *n;
    }
    if (Status s = AddUnique(hosts, seen, std::move(*e), where); !s.ok()) return s;
  }
  if (hosts.empty()) return Status::InvalidArgument(fmt::format("hostfile {}: no hosts", name));
  return hosts;
}

Result<std::vector<HostEntry>> ParseHostList(std::string_view list, const std::string& flag) {
  std::vector<HostEntry> hosts;
  std::map<std::string, std::string> seen;
  for (const std::string& word : Split(list, ',')) {
    std::string where = fmt::format("{} '{}'", flag, word);
    if (word.empty()) return Status::InvalidArgument(fmt::format("{}: expected HOST[:SLOTS],..., got '{}'", flag, list));
    Result<HostEntry> e = HostWord(word, flag);
    if (!e.ok()) return e.status();
    if (Status s = AddUnique(hosts, seen, std::move(*e), where); !s.ok()) return s;
  }
  return hosts;
}

Result<std::vector<HostEntry>> FilterHosts(std::vector<HostEntry> hosts, const std::string& include,
                                           const std::string& exclude) {
  if (!include.empty() && !exclude.empty())
    return Status::InvalidArgument("--include and --exclude: give one of them, not both");
  const bool inc = !include.empty();
  const std::string& spec = inc ? include : exclude;
  const std::string flag = inc ? "include" : "exclude";
  if (spec.empty()) return hosts;

  // host -> the slots named (empty: the whole host).
  std::map<std::string, std::vector<int>> named;
  for (const std::string& part : Split(spec, '@')) {
    size_t colon = part.find(':');
    std::string host = part.substr(0, colon);
    if (host.empty()) return Status::InvalidArgument(fmt::format("--{}: expected HOST[:SLOT,SLOT][@HOST...], got '{}'", flag, spec));
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const HostEntry& e) { return e.host == host; });
    if (it == hosts.end()) return Status::InvalidArgument(fmt::format("--{}: host '{}' is not in the node list", flag, host));
    std::vector<int> slots;
    if (colon != std::string::npos) {
      Result<std::vector<int>> s = SlotList(std::string_view(part).substr(colon + 1), flag, spec);
      if (!s.ok()) return s.status();
      if (!it->slots) return Status::InvalidArgument(fmt::format("--{}: host '{}' has no slot count to pick from", flag, host));
      for (int slot : *s)
        if (slot >= *it->slots)
          return Status::InvalidArgument(fmt::format("--{}: host '{}' has slots 0-{}, not {}", flag, host, *it->slots - 1, slot));
      slots = *s;
    }
    named[host] = slots;
  }

  std::vector<HostEntry> out;
  for (HostEntry& e : hosts) {
    auto it = named.find(e.host);
    bool whole = it != named.end() && it->second.empty();
    if (inc) {
      if (it == named.end()) continue;
      if (!whole) e.only_slots = it->second;
    } else {
      if (whole) continue;
      if (it != named.end()) {
        for (int s = 0; s < *e.slots; ++s)
          if (std::find(it->second.begin(), it->second.end(), s) == it->second.end()) e.only_slots.push_back(s);
        if (e.only_slots.empty()) continue;
      }
    }
    std::sort(e.only_slots.begin(), e.only_slots.end());
    e.only_slots.erase(std::unique(e.only_slots.begin(), e.only_slots.end()), e.only_slots.end());
    out.push_back(std::move(e));
  }
  if (out.empty()) return Status::InvalidArgument(fmt::format("--{} {}: no host is left", flag, spec));
  return out;
}

int WorkersOn(const HostEntry& entry, bool nproc_given, int nproc) {
  if (!entry.only_slots.empty()) return static_cast<int>(entry.only_slots.size());
  if (nproc_given || !entry.slots) return nproc;
  return *entry.slots;
}

}  // namespace dlaunch::launcher
