#pragma once
// RequestError: a request refused before it reached any worker, with the code the client gets.

#include "protocol/error.h"

#include <stdexcept>
#include <string>

namespace canopy::daemon {

class RequestError : public std::runtime_error {
public:
    RequestError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
    ErrorCode code() const noexcept { return code_; }

private:
    ErrorCode code_;
};

// Refuses the request being handled as BAD_REQUEST with `message`.
[[noreturn]] inline void bad_request(const std::string& message) {
    throw RequestError(ErrorCode::BAD_REQUEST, message);
}

} // namespace canopy::daemon
