#pragma once
// RequestError: a request refused before it reached any worker, with the code the client gets.

#include "protocol/error.h"

#include <stdexcept>
#include <string>
#include <utility>

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

// The code and message of the exception being handled; call it only inside a catch block. A RequestError or
// WireError keeps its code; anything else is BAD_REQUEST.
inline std::pair<ErrorCode, std::string> current_error() {
    try {
        throw;
    } catch (const RequestError& e) {
        return {e.code(), e.what()};
    } catch (const WireError& e) {
        return {e.code(), e.what()};
    } catch (const std::exception& e) {
        return {ErrorCode::BAD_REQUEST, e.what()};
    } catch (...) {
        return {ErrorCode::BAD_REQUEST, "an unknown error"};
    }
}

} // namespace canopy::daemon
