// --rdzv-conf KEY=VALUE,...: the keys dlaunch's rendezvous reads, torchrun's
// that it ignores, and what it makes of any other. Internal to launcher/config/.
#pragma once

#include <string>

#include "base/status.hpp"
#include "launcher/config/cli.hpp"

namespace dlaunch::launcher {

// Sets is_host, join_timeout, last_call_timeout and heartbeat_timeout from
// `value`. Keys torchrun's c10d and etcd backends read are ignored; any other
// key is ignored with a line in o.warnings naming it, as torchrun ignores it,
// unless it is a near miss of one of dlaunch's (edit distance 2 or less), which
// fails with a did-you-mean. One pair of matching quotes around the whole value
// is removed first. Fails naming the key and value.
Status SetRdzvConf(Options& o, const std::string& value);

}  // namespace dlaunch::launcher
