#include "launcher/config/metrics_addr.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::launcher {

TEST_CASE("--metrics-addr: PORT alone is loopback, port 0 allowed, HOST:PORT and [V6]:PORT", "[metrics_addr]") {
  struct Case {
    const char* text;
    const char* host;
    int port;
  };
  for (const Case& c : {Case{"9400", "127.0.0.1", 9400}, Case{":0", "127.0.0.1", 0}, Case{"0", "127.0.0.1", 0},
                        Case{"0.0.0.0:9400", "0.0.0.0", 9400}, Case{"localhost:65535", "127.0.0.1", 65535},
                        Case{"[::1]:9", "::1", 9}, Case{"[::]:0", "::", 0}}) {
    INFO(c.text);
    Result<rendezvous::HostPort> hp = ParseMetricsAddr(c.text, "--metrics-addr ");
    REQUIRE(hp.ok());
    CHECK(hp->host == c.host);
    CHECK(hp->port == c.port);
  }
}

TEST_CASE("--metrics-addr: a bad value is named with what to give", "[metrics_addr]") {
  for (const char* bad : {"", "x", "a:", "a:b", "65536", "99999999999999999999", "-1", "::1:9", "[::1]", "[]:9",
                          "[::1]9", "a:9 ", "+9", "node-a:9", "[127.0.0.1]:9", "1.2.3:9"}) {
    INFO(bad);
    Result<rendezvous::HostPort> hp = ParseMetricsAddr(bad, "--metrics-addr ");
    REQUIRE_FALSE(hp.ok());
    CHECK(hp.status().message() ==
          std::string("--metrics-addr ") + bad +
              ": expected ADDR:PORT or PORT (ADDR an IP address or localhost; PORT 0 to 65535, 0: any "
              "free port)");
  }
}

TEST_CASE("DLAUNCH_METRICS_ADDR serves when the flag is not given; the flag wins", "[metrics_addr]") {
  envmap::EnvMap env{{kMetricsAddrEnvVar, "9401"}};
  auto none = MetricsAddrFor("", {});
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  auto from_env = MetricsAddrFor("", env);
  REQUIRE(from_env.ok());
  CHECK((*from_env)->port == 9401);
  auto flag = MetricsAddrFor("9402", env);
  REQUIRE(flag.ok());
  CHECK((*flag)->port == 9402);
  auto bad = MetricsAddrFor("", {{kMetricsAddrEnvVar, "nope"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().starts_with("DLAUNCH_METRICS_ADDR=nope: expected ADDR:PORT"));
}

}  // namespace dlaunch::launcher
