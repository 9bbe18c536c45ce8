#include "launcher/core/peer_socket.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

namespace ip = boost::asio::ip;

// The address in the four 32-bit words of an inet_diag_sockid (network order).
void PutDiagAddress(const ip::address& a, __be32 out[4]) {
  if (a.is_v4()) {
    const auto bytes = a.to_v4().to_bytes();
    std::memcpy(&out[0], bytes.data(), bytes.size());
  } else {
    const auto bytes = a.to_v6().to_bytes();
    std::memcpy(out, bytes.data(), bytes.size());
  }
}

ip::address DiagAddress(uint8_t family, const __be32 words[4]) {
  if (family == AF_INET) {
    ip::address_v4::bytes_type b;
    std::memcpy(b.data(), &words[0], b.size());
    return ip::address_v4(b);
  }
  ip::address_v6::bytes_type b;
  std::memcpy(b.data(), words, b.size());
  return PlainAddress(ip::address_v6(b));
}

}  // namespace

ip::address PlainAddress(const ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, a.to_v6());
  return a;
}

namespace {

// `a` without its IPv6 scope (a link-local address's interface): the kernel's
// answer carries the interface apart, in idiag_if.
ip::address Unscoped(const ip::address& a) {
  if (!a.is_v6() || a.to_v6().scope_id() == 0) return a;
  return ip::address_v6(a.to_v6().to_bytes());
}

}  // namespace

Result<PeerSocket> KernelSocketOwners::OwnerOf(const ip::tcp::endpoint& ours, const ip::tcp::endpoint& theirs) {
  const ip::address us = Unscoped(PlainAddress(ours.address()));
  const ip::address them = Unscoped(PlainAddress(theirs.address()));
  if (us.is_v4() != them.is_v4()) return PeerSocket{};  // no such connection

  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } ask{};
  ask.header.nlmsg_len = sizeof ask;
  ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.header.nlmsg_flags = NLM_F_REQUEST;
  ask.header.nlmsg_seq = 1;
  ask.request.sdiag_family = them.is_v4() ? AF_INET : AF_INET6;
  ask.request.sdiag_protocol = IPPROTO_TCP;
  ask.request.idiag_states = ~0U;
  // The peer's socket: its local end is their endpoint, its remote end ours.
  ask.request.id.idiag_sport = htons(theirs.port());
  ask.request.id.idiag_dport = htons(ours.port());
  PutDiagAddress(them, ask.request.id.idiag_src);
  PutDiagAddress(us, ask.request.id.idiag_dst);
  // A link-local peer's socket is found only on its interface (the kernel's
  // lookup matches a socket bound to a device against this index).
  if (theirs.address().is_v6()) ask.request.id.idiag_if = theirs.address().to_v6().scope_id();
  ask.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  ask.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

  auto failed = [](const char* step, int err) {
    return Status::Io(fmt::format("sock_diag: cannot {} ({})", step, std::strerror(err)));
  };
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return failed("open a netlink socket", errno);
  // The kernel queues its answer before sendto returns; the timeout only keeps
  // a kernel that never answers from stopping the caller's loop.
  timeval limit{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, &ask, sizeof ask, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    int err = errno;
    close(fd);
    return failed("ask the kernel", err);
  }
  alignas(nlmsghdr) std::array<char, 8192> buf;
  ssize_t n = recv(fd, buf.data(), buf.size(), 0);
  int err = errno;
  close(fd);
  if (n < 0) return failed("read the kernel's answer", err);

  int left = static_cast<int>(n);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return failed("read the kernel's answer", EPROTO);
      if (e->error == -ENOENT) return PeerSocket{};
      return failed("ask the kernel", -e->error);
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) continue;
    const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
    // The lookup falls back to a listener on their address and port, and it
    // finds the kernel's leftovers of a closed socket (TIME_WAIT and
    // FIN_WAIT2 remnants, whose uid reads 0): only a socket with exactly this
    // four-tuple that a process still holds (an inode) has an owner.
    const bool exact = m->id.idiag_sport == htons(theirs.port()) && m->id.idiag_dport == htons(ours.port()) &&
                       DiagAddress(m->idiag_family, m->id.idiag_src) == them &&
                       DiagAddress(m->idiag_family, m->id.idiag_dst) == us;
    if (!exact || m->idiag_state == TCP_LISTEN) return PeerSocket{};
    if (m->idiag_inode == 0) return PeerSocket{true, std::nullopt};
    return PeerSocket{true, m->idiag_uid};
  }
  return PeerSocket{};
}

std::vector<ip::address> ThisMachineAddresses() {
  std::vector<ip::address> out;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      out.push_back(ip::address_v4(ntohl(a->sin_addr.s_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &a->sin6_addr, b.size());
      out.push_back(PlainAddress(ip::address_v6(b, a->sin6_scope_id)));
    }
  }
  freeifaddrs(ifs);
  return out;
}

}  // namespace dlaunch::launcher
