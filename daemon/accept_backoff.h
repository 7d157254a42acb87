#pragma once
// AcceptBackoff: what a listener does when accept fails while its socket is still open (EMFILE or ENFILE
// when the process or the system has no file descriptor left, ENOBUFS or ENOMEM without memory, anything
// else alike). The listener stops accepting for `pause`, then tries again; it never spins and never gives
// up. A run of failures logs one warning when it starts and one info line when an accept succeeds again.
//
// Thread safety: used from the io thread of its io_context only.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
// clang-format off
#include <utility> // Boost 1.74's Asio needs it first under C++20
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
// clang-format on
#include <spdlog/logger.h>

namespace canopy::daemon {

class AcceptBackoff {
public:
    // `listener` names the listener in log lines ("control socket /run/canopy/canopy.sock").
    AcceptBackoff(boost::asio::io_context& io, std::string listener, std::chrono::milliseconds pause,
                  std::shared_ptr<spdlog::logger> log);

    // An accept failed with `ec`: logs when this starts a run of failures, and calls `retry` after the pause
    // unless cancel() runs first.
    void failed(const boost::system::error_code& ec, std::function<void()> retry);
    // An accept succeeded: ends a run of failures.
    void succeeded();
    // Drops a pending retry (the listener is closing).
    void cancel();

    // Failed accepts of the current run; 0 when the last accept succeeded.
    std::uint64_t failures() const noexcept { return failures_; }

    // The accept loop both listeners run: accepts one connection on `acceptor` at a time and hands it to
    // `admit`, pauses after a failure, and ends once `stopped` is true or the acceptor is closed. `stopped`
    // and `admit` must outlive the loop (they belong to the listener that owns this AcceptBackoff).
    template <class Acceptor, class Admit>
    void accept_loop(Acceptor& acceptor, const bool& stopped, Admit admit) {
        acceptor.async_accept([this, &acceptor, &stopped, admit](const boost::system::error_code& ec, auto socket) {
            if (ec == boost::asio::error::operation_aborted || stopped) {
                return;
            }
            if (ec) {
                failed(ec, [this, &acceptor, &stopped, admit] {
                    if (!stopped) {
                        accept_loop(acceptor, stopped, admit);
                    }
                });
                return;
            }
            succeeded();
            admit(std::move(socket));
            accept_loop(acceptor, stopped, admit);
        });
    }

private:
    boost::asio::steady_timer timer_;
    std::string listener_;
    std::chrono::milliseconds pause_;
    std::shared_ptr<spdlog::logger> log_;
    std::uint64_t failures_ = 0;
};

} // namespace canopy::daemon
