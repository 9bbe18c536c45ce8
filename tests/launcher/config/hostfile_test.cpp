#include "launcher/config/hostfile.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

struct WantHost {
  std::string host;
  std::optional<int> slots;
  std::vector<int> only = {};
};

void CheckHosts(const Result<std::vector<HostEntry>>& got, const std::vector<WantHost>& want) {
  INFO((got.ok() ? std::string("ok") : got.status().message()));
  REQUIRE(got.ok());
  REQUIRE(got->size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("entry " << i);
    CHECK((*got)[i].host == want[i].host);
    CHECK((*got)[i].slots == want[i].slots);
    CHECK((*got)[i].only_slots == want[i].only);
  }
}

std::string HostfileError(const Result<std::vector<HostEntry>>& got) {
  REQUIRE_FALSE(got.ok());
  return got.status().message();
}

}  // namespace

TEST_CASE("hostfiles in Open MPI, DeepSpeed and host:N forms", "[hostfile]") {
  CheckHosts(ParseHostfile("# Open MPI\nn1 slots=4 max_slots=8\n\n  n2   slots=2  # trailing\n", "h"),
             {{"n1", 4}, {"n2", 2}});
  CheckHosts(ParseHostfile("worker-0 slots=8\nworker-1 slots=8", "h"), {{"worker-0", 8}, {"worker-1", 8}});
  CheckHosts(ParseHostfile("a:3\nb\r\n", "h"), {{"a", 3}, {"b", std::nullopt}});
}

TEST_CASE("a bad hostfile line is named by file and line", "[hostfile]") {
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"n0 slots=2\nn1 slot=4\n", "hostfile hosts.txt:2: expected 'slots=N', got 'slot=4'"},
      {"n0 slots=2\nn1 slots=abc\n", "hostfile hosts.txt:2: expected a positive count in 'slots=abc'"},
      {"n0 slots=0\n", "hostfile hosts.txt:1: expected a positive count in 'slots=0'"},
      {"n0:x\n", "hostfile hosts.txt:1: expected HOST:SLOTS, got 'n0:x'"},
      {"n0\n# c\nn0 slots=2\n", "hostfile hosts.txt:3: host 'n0' is listed twice (first at hostfile hosts.txt:1)"},
      {"# only a comment\n\n", "hostfile hosts.txt: no hosts"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(HostfileError(ParseHostfile(c.text, "hosts.txt")) == c.error);
  }
}

TEST_CASE("mpirun's -H list", "[hostfile]") {
  CheckHosts(ParseHostList("n1:4,n2:4", "-H"), {{"n1", 4}, {"n2", 4}});
  CheckHosts(ParseHostList("n1,n2", "-H"), {{"n1", std::nullopt}, {"n2", std::nullopt}});
  CHECK(HostfileError(ParseHostList("n1:4,,n2", "-H")) == "-H: expected HOST[:SLOTS],..., got 'n1:4,,n2'");
  CHECK(HostfileError(ParseHostList("n1:0", "-H")) == "-H: expected HOST:SLOTS, got 'n1:0'");
  CHECK(HostfileError(ParseHostList("n1,n1:2", "-H")) == "-H 'n1:2': host 'n1' is listed twice (first at -H 'n1')");
}

TEST_CASE("DeepSpeed's --include and --exclude pick hosts and slots", "[hostfile]") {
  auto hosts = [] { return *ParseHostfile("w0 slots=4\nw1 slots=4\nw2 slots=4\n", "h"); };
  CheckHosts(FilterHosts(hosts(), "", ""), {{"w0", 4}, {"w1", 4}, {"w2", 4}});
  CheckHosts(FilterHosts(hosts(), "w0:0,2@w2", ""), {{"w0", 4, {0, 2}}, {"w2", 4}});
  CheckHosts(FilterHosts(hosts(), "", "w1"), {{"w0", 4}, {"w2", 4}});
  CheckHosts(FilterHosts(hosts(), "", "w0:1@w2:0,3"), {{"w0", 4, {0, 2, 3}}, {"w1", 4}, {"w2", 4, {1, 2}}});
  // Excluding every slot of a host leaves the host out.
  CheckHosts(FilterHosts(hosts(), "", "w1:0,1,2,3"), {{"w0", 4}, {"w2", 4}});

  CHECK(HostfileError(FilterHosts(hosts(), "w9", "")) == "--include: host 'w9' is not in the node list");
  CHECK(HostfileError(FilterHosts(hosts(), "w0:4", "")) == "--include: host 'w0' has slots 0-3, not 4");
  CHECK(HostfileError(FilterHosts(hosts(), "w0:x", "")) ==
        "--include: expected HOST[:SLOT,SLOT][@HOST...], got 'w0:x'");
  CHECK(HostfileError(FilterHosts(hosts(), "w0", "w1")) == "--include and --exclude: give one of them, not both");
  CHECK(HostfileError(FilterHosts(hosts(), "", "w0@w1@w2")) == "--exclude w0@w1@w2: no host is left");
  CHECK(HostfileError(FilterHosts(*ParseHostList("a,b", "-H"), "a:0", "")) ==
        "--include: host 'a' has no slot count to pick from");
}

TEST_CASE("workers per node: picked slots, else --nproc-per-node, else the list's slots", "[hostfile]") {
  CHECK(WorkersOn(HostEntry{"a", 4, {}}, false, 1) == 4);
  CHECK(WorkersOn(HostEntry{"a", 4, {}}, true, 2) == 2);
  CHECK(WorkersOn(HostEntry{"a", std::nullopt, {}}, false, 1) == 1);
  CHECK(WorkersOn(HostEntry{"a", std::nullopt, {}}, true, 3) == 3);
  CHECK(WorkersOn(HostEntry{"a", 8, {1, 5}}, true, 8) == 2);
}

}  // namespace dlaunch::launcher

namespace dlaunch::launcher {

TEST_CASE("IPv6 literals: bracketed in -H and hostfiles, bare in hostfile lines", "[hostfile][bounds]") {
  CheckHosts(ParseHostfile("fe80::1 slots=2\n::1\n2001:db8::1:8\n[fe80::2]:4\n[::2] slots=3\nfe80::3%eth0\n", "h"),
             {{"fe80::1", 2},
              {"::1", std::nullopt},
              {"2001:db8::1:8", std::nullopt},
              {"fe80::2", 4},
              {"::2", 3},
              {"fe80::3%eth0", std::nullopt}});
  CheckHosts(ParseHostList("[fe80::1]:4,[::1],n1:2", "-H"), {{"fe80::1", 4}, {"::1", std::nullopt}, {"n1", 2}});
  CHECK(HostfileError(ParseHostList("2001:db8::1:8", "-H")) ==
        "-H: ambiguous host '2001:db8::1:8' (write an IPv6 address in brackets: [ADDRESS] or [ADDRESS]:SLOTS)");
  CHECK(HostfileError(ParseHostList("n1,::1", "-H")) ==
        "-H: ambiguous host '::1' (write an IPv6 address in brackets: [ADDRESS] or [ADDRESS]:SLOTS)");
  CHECK(HostfileError(ParseHostList("[fe80::1", "-H")) ==
        "-H: expected HOST[:SLOTS] or [IPV6-ADDRESS][:SLOTS], got '[fe80::1'");
  CHECK(HostfileError(ParseHostList("[n1]:2", "-H")) ==
        "-H: expected HOST[:SLOTS] or [IPV6-ADDRESS][:SLOTS], got '[n1]:2'");
  CHECK(HostfileError(ParseHostList("[::1]x", "-H")) ==
        "-H: expected HOST[:SLOTS] or [IPV6-ADDRESS][:SLOTS], got '[::1]x'");
  CHECK(HostfileError(ParseHostfile("a:b:c slots=1\n", "h")) ==
        "hostfile h:1: expected HOST[:SLOTS] or an IPv6 address, got 'a:b:c'");
  CHECK(HostfileError(ParseHostfile("[::1]\n::1 slots=2\n", "h")) ==
        "hostfile h:2: host '::1' is listed twice (first at hostfile h:1)");
  // --include and --exclude take bracketed literals too.
  CheckHosts(FilterHosts(*ParseHostList("[fe80::1]:4,n2:4", "-H"), "[fe80::1]:1,2", ""), {{"fe80::1", 4, {1, 2}}});
  CheckHosts(FilterHosts(*ParseHostList("[fe80::1]:4,n2:4", "-H"), "", "[fe80::1]"), {{"n2", 4}});
}

TEST_CASE("node lists are bounded: slots and host counts", "[hostfile][bounds]") {
  CHECK(HostfileError(ParseHostList("n1:2000000000", "-H")) ==
        "-H: 'n1:2000000000' is over the limit of 65536 workers per node");
  CHECK(HostfileError(ParseHostfile("n1 slots=65537\n", "h")) ==
        "hostfile h:1: 'slots=65537' is over the limit of 65536 workers per node");
  CHECK(HostfileError(ParseHostfile("n1:70000\n", "h")) ==
        "hostfile h:1: 'n1:70000' is over the limit of 65536 workers per node");
  CheckHosts(ParseHostList("n1:65536", "-H"), {{"n1", 65536}});
  std::string many;
  for (int i = 0; i <= 1048576; ++i) many += fmt::format("n{},", i);
  many.pop_back();
  CHECK(HostfileError(ParseHostList(many, "-H")) == "-H: more than 1048576 hosts");
  std::string lines;
  for (int i = 0; i <= 1048576; ++i) lines += fmt::format("n{}\n", i);
  CHECK(HostfileError(ParseHostfile(lines, "big")) == "hostfile big:1048577: more than 1048576 hosts");
}

TEST_CASE("--include and --exclude merge repeated hosts", "[hostfile][bounds]") {
  auto hosts = [] { return *ParseHostfile("w0 slots=4\nw1 slots=4\n", "h"); };
  CheckHosts(FilterHosts(hosts(), "w0:0@w0:1", ""), {{"w0", 4, {0, 1}}});
  CheckHosts(FilterHosts(hosts(), "w0:3@w0", ""), {{"w0", 4}});
  CheckHosts(FilterHosts(hosts(), "", "w0:1@w0:2"), {{"w0", 4, {0, 3}}, {"w1", 4}});
  CheckHosts(FilterHosts(hosts(), "", "w0:1@w0"), {{"w1", 4}});
}

TEST_CASE("file content in messages is escaped", "[hostfile][bounds]") {
  CHECK(HostfileError(ParseHostfile(std::string("\x7f"
                                                "ELF\x02\x01\x01 slots=1\n"),
                                    "bin")) == "hostfile bin:1: expected a host name, got '\\x7fELF\\x02\\x01\\x01'");
  CHECK(HostfileError(ParseHostfile(std::string("n0 \x1b[31mred\n"), "h")) ==
        "hostfile h:1: expected 'slots=N', got '\\x1b[31mred'");
  CHECK(HostfileError(ParseHostfile(std::string("n\0 slots=1\n", 11), "h")) ==
        "hostfile h:1: expected a host name, got 'n\\x00'");
  CHECK(HostfileError(ParseHostfile("-oProxyCommand=x slots=1\n", "h")) ==
        "hostfile h:1: expected a host name, got '-oProxyCommand=x'");
  CHECK(HostfileError(ParseHostList("n\x01:2", "-H")) == "-H: expected a host name, got 'n\\x01:2'");
}

}  // namespace dlaunch::launcher

namespace dlaunch::launcher {

TEST_CASE("a hostfile is a regular file of bounded size", "[hostfile][bounds]") {
  char dir_tmpl[] = "/tmp/dlaunch-hostfile-XXXXXX";
  REQUIRE(mkdtemp(dir_tmpl) != nullptr);
  std::string dir = dir_tmpl;
  std::string fifo = dir + "/fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(ReadHostfile(fifo).status().message() == "--hostfile " + fifo + ": not a regular file");
  CHECK(ReadHostfile("/dev/zero").status().message() == "--hostfile /dev/zero: not a regular file");
  CHECK(ReadHostfile(dir + "/none").status().message() ==
        "--hostfile " + dir + "/none: cannot read (No such file or directory)");
  std::string plain = dir + "/hosts";
  {
    std::ofstream f(plain);
    f << "n1 slots=2\n";
  }
  CHECK(*ReadHostfile(plain) == "n1 slots=2\n");
  std::string big = dir + "/big";
  { std::ofstream f(big); }
  REQUIRE(truncate(big.c_str(), static_cast<off_t>(kMaxHostfileBytes) + 1) == 0);
  CHECK(ReadHostfile(big).status().message() == "--hostfile " + big + ": over the limit of 67108864 bytes");
  std::filesystem::remove_all(dir);
}

}  // namespace dlaunch::launcher
