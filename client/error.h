#pragma once
// The exceptions of the canopy client library.
//
//   Error            the daemon refused a request: its error code (protocol/error.h) and message, as the reply
//                    said ({"ok": false, "error": {"code", "message"}}).
//   TaskError        (client/types.h) an Error for a task that failed or was rejected, thrown by the futures'
//                    get(); it carries the task's final state.
//   ConnectError     the socket could not be connected to (no daemon, wrong path, no permission): the path and errno.
//   ProtocolError    the stream broke, or a reply does not follow docs/control-protocol.md.
//
// Bad arguments (a socket path longer than sockaddr_un takes, a task id of 0 to a future) are
// std::invalid_argument.
//
// Thread safety: plain values.

#include "protocol/error.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace canopy::client {

struct TaskState;

class Error : public std::runtime_error {
public:
    // `code_name` is the code as the daemon spelled it; `code` is ErrorCode::OK only for a name this library does
    // not know (a newer daemon).
    Error(ErrorCode code, std::string code_name, const std::string& message)
        : std::runtime_error(message), code_(code), code_name_(std::move(code_name)) {}
    Error(ErrorCode code, const std::string& message) : Error(code, std::string(error_code_name(code)), message) {}

    ErrorCode code() const noexcept { return code_; }
    const std::string& code_name() const noexcept { return code_name_; }

private:
    ErrorCode code_;
    std::string code_name_;
};

class ConnectError : public std::runtime_error {
public:
    ConnectError(std::string path, int err, const std::string& message)
        : std::runtime_error(message), path_(std::move(path)), err_(err) {}
    const std::string& path() const noexcept { return path_; }
    int err() const noexcept { return err_; }

private:
    std::string path_;
    int err_;
};

class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

} // namespace canopy::client
