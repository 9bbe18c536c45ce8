// How this program looks host names up, for the line that says a name did not
// resolve: a name that `getent hosts` knows and dlaunch does not is otherwise a
// puzzle. A dynamically linked dlaunch goes through /etc/nsswitch.conf like
// every program; the static-pie one (the default) through glibc's built-in
// /etc/hosts and DNS first, then `getent ahosts` for what they do not know
// (launcher/core/getent_hosts.hpp).
#pragma once

#include <string>
#include <string_view>

namespace dlaunch::rendezvous {

// The sources of the `hosts:` line of an nsswitch.conf text ("files myhostname
// dns", its actions such as "[NOTFOUND=return]" kept), comments left out; ""
// when the text has no such line.
std::string NsswitchHosts(std::string_view conf);

// "looked up through /etc/nsswitch.conf: files myhostname dns", or, in a
// static program, "looked up in /etc/hosts and DNS, then with getent through
// /etc/nsswitch.conf: files myhostname dns", from the text of nsswitch.conf.
std::string DescribeHostLookup(bool is_static, std::string_view conf);
// The same for this program and this machine's /etc/nsswitch.conf, read at
// every call: it is for an error's message only.
std::string DescribeHostLookup();

}  // namespace dlaunch::rendezvous
