#include "launcher/core/text.hpp"

#include <csignal>

#include <fmt/format.h>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {

TEST_CASE("Printable escapes every byte outside printable ASCII", "[text][bounds]") {
  CHECK(Printable("n1 slots=2") == "n1 slots=2");
  CHECK(Printable(std::string("\x7f"
                              "ELF\x02\x00\x1b[0m\xff\\",
                              12)) == "\\x7fELF\\x02\\x00\\x1b[0m\\xff\\");
  CHECK(Printable("\t\n\r") == "\\x09\\x0a\\x0d");
}

TEST_CASE("PrintablePrefix quotes at most a bounded prefix, then the size", "[text][bounds]") {
  CHECK(PrintablePrefix("short", 8) == "short");
  CHECK(PrintablePrefix("exactly8", 8) == "exactly8");
  CHECK(PrintablePrefix("nine byte", 8) == "nine byt... (9 bytes)");
  CHECK(PrintablePrefix(std::string(40000, '['), 4) == "[[[[... (40000 bytes)");
  CHECK(PrintablePrefix("\x1b[2Jxyz", 4) == "\\x1b[2J... (7 bytes)");
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

TEST_CASE("SafeUtf8 keeps valid UTF-8 and makes controls and bad bytes '?'", "[text][bounds]") {
  CHECK(SafeUtf8("plain \xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80", false) ==
        "plain \xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80");
  CHECK(SafeUtf8("a\x1b[2Jb\rc\td\ne\x7f", false) == "a?[2Jb?c?d?e?");
  CHECK(SafeUtf8("c\td\ne", true) == "c\td\ne");
  CHECK(SafeUtf8("\xff\xc3(\xc0\xaf\xed\xa0\x80\xc2\x9b", false) == "??(???????");
  CHECK(SafeUtf8("cut \xe2\x9c", false) == "cut ??");
}

TEST_CASE("ValidUtf8 keeps valid UTF-8, controls too, and makes each bad byte U+FFFD", "[text][bounds]") {
  const std::string r = "\xef\xbf\xbd";
  CHECK(ValidUtf8("plain \xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80") ==
        "plain \xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80");
  CHECK(ValidUtf8("a\x1b[2Jb\r\t\n\x7f\xc2\x9b") == "a\x1b[2Jb\r\t\n\x7f\xc2\x9b");
  CHECK(ValidUtf8("\xff") == r);
  CHECK(ValidUtf8("\xc0\xaf") == r + r);                  // overlong '/'
  CHECK(ValidUtf8("\xed\xa0\x80") == r + r + r);          // a surrogate
  CHECK(ValidUtf8("\xf4\x90\x80\x80") == r + r + r + r);  // past U+10FFFF
  CHECK(ValidUtf8("cut \xe2\x9c") == "cut " + r + r);
  CHECK(ValidUtf8(std::string("nul\0in", 6)) == std::string("nul\0in", 6));
}

}  // namespace dlaunch::launcher

TEST_CASE("SignalName names every Linux signal as torch's failure report does", "[text][signals]") {
  CHECK(SignalName(SIGKILL) == "SIGKILL");
  CHECK(SignalName(SIGSEGV) == "SIGSEGV");
  // Python's signal.Signals names these; a bare number says nothing to the reader.
  CHECK(SignalName(SIGWINCH) == "SIGWINCH");
  CHECK(SignalName(SIGPROF) == "SIGPROF");
  CHECK(SignalName(SIGVTALRM) == "SIGVTALRM");
  CHECK(SignalName(SIGPWR) == "SIGPWR");
  CHECK(SignalName(SIGTTOU) == "SIGTTOU");
  CHECK(SignalName(SIGRTMIN) == "SIGRTMIN");
  CHECK(SignalName(SIGRTMIN + 2) == "SIGRTMIN+2");
  CHECK(SignalName(SIGRTMAX) == "SIGRTMAX");
  CHECK(SignalName(0) == "signal 0");
  CHECK(SignalName(NSIG + 5) == fmt::format("signal {}", NSIG + 5));
  CHECK(SignalNumber("SIGPWR") == SIGPWR);
  CHECK(SignalNumber("winch") == SIGWINCH);
}

namespace dlaunch::launcher {

TEST_CASE("SecondsText: seconds as a user writes them", "[text]") {
  using std::chrono::milliseconds;
  CHECK(SecondsText(milliseconds(60'000)) == "60s");
  CHECK(SecondsText(milliseconds(1'500)) == "1.5s");
  CHECK(SecondsText(milliseconds(250)) == "0.25s");
  CHECK(SecondsText(milliseconds(0)) == "0s");
  CHECK(SecondsText(milliseconds(2'592'000'000)) == "2592000s");
}

}  // namespace dlaunch::launcher
