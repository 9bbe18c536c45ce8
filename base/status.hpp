// Status and Result<T>: how every dlaunch library reports failure.
//
// Library code returns these instead of throwing; only main() turns a failed
// Status into an exit code. A message reads "subject: problem (cause)".
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dlaunch {

enum class Code {
  kOk,
  kInvalidArgument,  // bad flag, value, hostfile line, frame
  kNotFound,         // a command or file that does not exist
  kTimeout,
  kIo,        // a system call failed
  kPeerLost,  // a rendezvous peer went away
};

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Timeout(std::string msg) { return Status(Code::kTimeout, std::move(msg)); }
  static Status Io(std::string msg) { return Status(Code::kIo, std::move(msg)); }
  static Status PeerLost(std::string msg) { return Status(Code::kPeerLost, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Either a value or a failed Status. Accessing value() of a failed Result is a
// programmer error.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be Ok

  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dlaunch
