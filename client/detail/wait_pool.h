#pragma once
// WaitPool: the connections that futures wait over (client/future.h). wait() takes an idle channel (or opens one to
// the socket), sends one `wait` request, and puts the channel back once the reply came whole; a channel whose
// stream broke is dropped.
//
// Thread safety: every method is safe from any thread (one mutex, not held during a request).

#include "client/detail/channel.h"
#include "client/types.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace canopy::client::detail {

// The longest timeout_ms one `wait` request takes: a day.
inline constexpr std::chrono::milliseconds MAX_WAIT_TIMEOUT{86'400'000};
// The most task ids one `wait` request names.
inline constexpr std::size_t MAX_WAIT_IDS = 100'000;

class WaitPool {
public:
    explicit WaitPool(std::string socket_path) : socket_path_(std::move(socket_path)) {}

    // One `wait` request for `ids` (1 to MAX_WAIT_IDS), with timeout_ms when given (at most MAX_WAIT_TIMEOUT).
    // Throws what Channel::call throws.
    WaitResult wait(const std::vector<std::uint64_t>& ids, std::optional<std::chrono::milliseconds> timeout);

private:
    std::string socket_path_;
    std::mutex mu_;
    std::vector<Channel> idle_;
};

} // namespace canopy::client::detail
