#include "launcher/core/text.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::launcher {

TEST_CASE("Printable escapes every byte outside printable ASCII", "[text][bounds]") {
  CHECK(Printable("n1 slots=2") == "n1 slots=2");
  CHECK(Printable(std::string("\x7f" "ELF\x02\x00\x1b[0m\xff\\", 12)) == "\\x7fELF\\x02\\x00\\x1b[0m\\xff\\");
  CHECK(Printable("\t\n\r") == "\\x09\\x0a\\x0d");
}

TEST_CASE("ParseSeconds: finite, not negative, at most 30 days, rounded up to a millisecond", "[text][bounds]") {
  using std::chrono::milliseconds;
  CHECK(ParseSeconds("30", false) == milliseconds(30000));
  CHECK(ParseSeconds("0.5", false) == milliseconds(500));
  CHECK(ParseSeconds("0.0001", false) == milliseconds(1));
  CHECK(ParseSeconds("2592000", false) == milliseconds(2592000000));
  CHECK(ParseSeconds("0", true) == milliseconds(0));
  for (const char* bad : {"0", "-1", "inf", "-inf", "nan", "1e300", "2592000.5", "", "5s", "infinity"}) {
    INFO(bad);
    CHECK_FALSE(ParseSeconds(bad, false).has_value());
  }
  CHECK_FALSE(ParseSeconds("-0.001", true).has_value());
}

}  // namespace dlaunch::launcher
