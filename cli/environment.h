#pragma once
// Environment: what the CLI takes from the process around it, as a value so tests can stand in for it.
//
// Thread safety: plain values.

#include "client/connection.h"

#include <chrono>
#include <string>

namespace canopy::cli {

inline constexpr const char* DEFAULT_SOCKET = client::DEFAULT_SOCKET;

struct Environment {
    std::string socket_env;                         // $CANOPY_SOCKET; empty when unset
    bool stderr_is_tty = false;                     // progress lines are drawn only on a terminal
    std::chrono::milliseconds progress_after{1000}; // a graph shows progress once it has run this long

    // $CANOPY_SOCKET and isatty(2) of this process; the default intervals.
    static Environment from_process();

    // --socket when given, else $CANOPY_SOCKET when set, else DEFAULT_SOCKET.
    std::string socket_path(const std::string& socket_option) const {
        if (!socket_option.empty()) {
            return socket_option;
        }
        return socket_env.empty() ? DEFAULT_SOCKET : socket_env;
    }
};

} // namespace canopy::cli
