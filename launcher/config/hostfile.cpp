#include "launcher/config/hostfile.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "launcher/core/text.hpp"

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

// Host names are quoted into ssh and shell lines: refuse control bytes (a binary
// file) and a leading '-' (ssh would take "-oProxyCommand=..." as an option).
bool ValidHostName(std::string_view host) {
  if (host.empty() || host[0] == '-') return false;
  for (char c : host)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  return true;
}

// An IPv6 literal, with an optional zone ("fe80::1%eth0"; the zone's bytes are
// checked as a host name's).
bool IsIpv6(std::string_view text) {
  size_t percent = text.find('%');
  if (percent + 1 == text.size()) return false;  // an empty zone
  std::string addr(text.substr(0, percent));
  in6_addr out{};
  return inet_pton(AF_INET6, addr.c_str(), &out) == 1;
}

// "host", "host:N", "[v6]" or "[v6]:N"; with `bare_ipv6` (a hostfile line, where
// slots come as "slots=N") also an unbracketed IPv6 literal. In -H a bare literal
// is refused: "2001:db8::1:8" is as much "2001:db8::1" with 8 slots.
Result<HostEntry> HostWord(std::string_view word, const std::string& where, bool bare_ipv6) {
  HostEntry e;
  std::string_view host = word;
  std::optional<std::string_view> slots;
  if (word.starts_with('[')) {
    size_t close = word.find(']');
    std::string_view rest = close == std::string_view::npos ? word : word.substr(close + 1);
    if (close == std::string_view::npos || !IsIpv6(word.substr(1, close - 1)) || !(rest.empty() || rest[0] == ':'))
      return Status::InvalidArgument(
          fmt::format("{}: expected HOST[:SLOTS] or [IPV6-ADDRESS][:SLOTS], got '{}'", where, Printable(word)));
    host = word.substr(1, close - 1);
    if (!rest.empty()) slots = rest.substr(1);
  } else if (std::count(word.begin(), word.end(), ':') > 1) {
    if (!bare_ipv6)
      return Status::InvalidArgument(
          fmt::format("{}: ambiguous host '{}' (write an IPv6 address in brackets: [ADDRESS] or [ADDRESS]:SLOTS)",
                      where, Printable(word)));
    if (!IsIpv6(word))
      return Status::InvalidArgument(
          fmt::format("{}: expected HOST[:SLOTS] or an IPv6 address, got '{}'", where, Printable(word)));
  } else if (size_t colon = word.find(':'); colon != std::string_view::npos) {
    host = word.substr(0, colon);
    slots = word.substr(colon + 1);
  }
  if (slots) {
    std::optional<int> n = ParseInt(*slots);
    if (host.empty() || !n || *n < 1)
      return Status::InvalidArgument(fmt::format("{}: expected HOST:SLOTS, got '{}'", where, Printable(word)));
    if (*n > kMaxWorkersPerNode)
      return Status::InvalidArgument(
          fmt::format("{}: '{}' is over the limit of {} workers per node", where, Printable(word), kMaxWorkersPerNode));
    e.slots = *n;
  }
  if (!ValidHostName(host))
    return Status::InvalidArgument(fmt::format("{}: expected a host name, got '{}'", where, Printable(word)));
  e.host = std::string(host);
  return e;
}

// A host may be named once: a second line would silently change the node ranks.
Status AddUnique(std::vector<HostEntry>& hosts, std::map<std::string, std::string>& seen, HostEntry e,
                 const std::string& where) {
  auto [it, fresh] = seen.emplace(e.host, where);
  if (!fresh)
    return Status::InvalidArgument(
        fmt::format("{}: host '{}' is listed twice (first at {})", where, Printable(e.host), it->second));
  hosts.push_back(std::move(e));
  return Status::Ok();
}

// "0,2" for --include/--exclude.
Result<std::vector<int>> SlotList(std::string_view list, const std::string& flag, const std::string& spec) {
  std::vector<int> slots;
  for (const std::string& s : Split(list, ',')) {
    std::optional<int> n = ParseInt(s);
    if (!n || *n < 0)
      return Status::InvalidArgument(
          fmt::format("--{}: expected HOST[:SLOT,SLOT][@HOST...], got '{}'", flag, Printable(spec)));
    slots.push_back(*n);
  }
  return slots;
}

}  // namespace

Result<std::string> ReadHostfile(const std::string& path, std::string_view subject) {
  auto fail = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{} {}: {}", subject, Printable(path), why));
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(fmt::format("cannot read ({})", std::strerror(errno)));
  struct stat st {};
  std::string text;
  Status status = Status::Ok();
  if (fstat(fd, &st) != 0) {
    status = fail(fmt::format("cannot read ({})", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    status = fail("not a regular file");
  } else {
    char buf[65536];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = fail(fmt::format("cannot read ({})", std::strerror(errno)));
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > kMaxHostfileBytes) {
        status = fail(fmt::format("over the limit of {} bytes", kMaxHostfileBytes));
        break;
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return text;
}

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
    if (hosts.size() == kMaxHosts)
      return Status::InvalidArgument(fmt::format("{}: more than {} hosts", where, kMaxHosts));
    Result<HostEntry> e = HostWord(words[0], where, true);
    if (!e.ok()) return e.status();
    for (size_t i = 1; i < words.size(); ++i) {
      std::string_view w = words[i];
      bool slots = w.starts_with("slots="), max_slots = w.starts_with("max_slots=") || w.starts_with("max-slots=");
      if (!slots && !max_slots)
        return Status::InvalidArgument(fmt::format("{}: expected 'slots=N', got '{}'", where, Printable(w)));
      std::optional<int> n = ParseInt(w.substr(w.find('=') + 1));
      if (!n || *n < 1)
        return Status::InvalidArgument(fmt::format("{}: expected a positive count in '{}'", where, Printable(w)));
      if (slots && *n > kMaxWorkersPerNode)
        return Status::InvalidArgument(
            fmt::format("{}: '{}' is over the limit of {} workers per node", where, Printable(w), kMaxWorkersPerNode));
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
  std::vector<std::string> words = Split(list, ',');
  if (words.size() > kMaxHosts) return Status::InvalidArgument(fmt::format("{}: more than {} hosts", flag, kMaxHosts));
  for (const std::string& word : words) {
    std::string where = fmt::format("{} '{}'", flag, Printable(word));
    if (word.empty())
      return Status::InvalidArgument(fmt::format("{}: expected HOST[:SLOTS],..., got '{}'", flag, Printable(list)));
    Result<HostEntry> e = HostWord(word, flag, false);
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
    // "host:0,1" or, for an IPv6 literal, "[fe80::1]:0,1".
    size_t colon = part.find(':');
    std::string host = part.substr(0, colon);
    if (part.starts_with('[')) {
      size_t close = part.find(']');
      colon = close == std::string::npos || close + 1 == part.size() ? std::string::npos : close + 1;
      host = close == std::string::npos ? "" : part.substr(1, close - 1);
      if (colon != std::string::npos && part[colon] != ':') host.clear();
    }
    if (host.empty())
      return Status::InvalidArgument(
          fmt::format("--{}: expected HOST[:SLOT,SLOT][@HOST...], got '{}'", flag, Printable(spec)));
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const HostEntry& e) { return e.host == host; });
    if (it == hosts.end())
      return Status::InvalidArgument(fmt::format("--{}: host '{}' is not in the node list", flag, Printable(host)));
    std::vector<int> slots;
    if (colon != std::string::npos) {
      Result<std::vector<int>> s = SlotList(std::string_view(part).substr(colon + 1), flag, spec);
      if (!s.ok()) return s.status();
      if (!it->slots)
        return Status::InvalidArgument(
            fmt::format("--{}: host '{}' has no slot count to pick from", flag, Printable(host)));
      for (int slot : *s)
        if (slot >= *it->slots)
          return Status::InvalidArgument(
              fmt::format("--{}: host '{}' has slots 0-{}, not {}", flag, Printable(host), *it->slots - 1, slot));
      slots = *s;
    }
    // A host named twice ("n1:0@n1:1") gets the union of its slots, and the
    // whole host once named whole: DeepSpeed users read '@' as "and".
    auto [entry, fresh] = named.emplace(host, slots);
    if (!fresh) {
      if (entry->second.empty() || slots.empty())
        entry->second.clear();
      else
        entry->second.insert(entry->second.end(), slots.begin(), slots.end());
    }
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
  if (out.empty()) return Status::InvalidArgument(fmt::format("--{} {}: no host is left", flag, Printable(spec)));
  return out;
}

int WorkersOn(const HostEntry& entry, bool nproc_given, int nproc) {
  if (!entry.only_slots.empty()) return static_cast<int>(entry.only_slots.size());
  if (nproc_given || !entry.slots) return nproc;
  return *entry.slots;
}

}  // namespace dlaunch::launcher
