#pragma once
// MetricsListener: the optional loopback HTTP listener for Prometheus (`metrics.listen` in the config).
//
// Each connection is one HTTP/1.0 exchange: the request head (at most 8 KiB) must arrive within
// head_timeout of the accept; GET /metrics is answered with the exposition text and anything else with
// 404; the response must be written within write_timeout; then the connection closes. A connection past
// a timeout is closed without a response. At most max_connections are open at once; one more is closed at
// once, without a response. A failed accept (no file descriptor left) pauses accepting for accept_backoff
// (AcceptBackoff); the listener never stops accepting until stop().
//
// Lifetime: exchanges may outlive the listener inside a stopping io_context; they share only a counter
// with it. Thread safety: everything, render() included, runs on the io thread of the io_context.

#include "config/config.h"
#include "daemon/accept_backoff.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
// clang-format off
#include <utility> // Boost 1.74's Asio needs it first under C++20
#include <boost/asio/ip/tcp.hpp>
// clang-format on
#include <spdlog/logger.h>

namespace canopy::daemon {

// The bounds of the metrics listener; docs/control-protocol.md "Limits" states each default.
// The defaults are the config's (config::MetricsConfig, docs/config.md).
struct MetricsLimits {
    std::size_t max_connections = config::MetricsConfig{}.max_connections;
    std::chrono::milliseconds head_timeout = config::MetricsConfig{}.timeout;  // from the accept to the end of the head
    std::chrono::milliseconds write_timeout = config::MetricsConfig{}.timeout; // to write the response
    std::chrono::milliseconds accept_backoff{100};                             // pause after a failed accept
};

// The answer to an HTTP request head: 200 for "GET /metrics" (any query string or fragment), 404 for
// another path, 405 for another method on /metrics, 400 for a request line that is not "METHOD TARGET
// HTTP/x".
struct HttpAnswer {
    int status;
    std::string_view reason;
};
HttpAnswer answer_request_line(std::string_view head);

class MetricsListener {
public:
    using Render = std::function<std::string()>;

    // Binds and listens on `endpoint`; throws boost::system::system_error.
    MetricsListener(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint, Render render,
                    MetricsLimits limits, std::shared_ptr<spdlog::logger> log);
    ~MetricsListener();

    void start();
    // Stops accepting; exchanges under way finish or time out.
    void stop();

    std::size_t connections() const noexcept;
    boost::asio::ip::tcp::endpoint local_endpoint() const;

private:
    class Exchange;
    struct Shared {
        std::size_t open = 0;
    };
    void do_accept();
    void admit(boost::asio::ip::tcp::socket socket);

    boost::asio::ip::tcp::acceptor acceptor_;
    Render render_;
    MetricsLimits limits_;
    std::shared_ptr<spdlog::logger> log_;
    AcceptBackoff backoff_;
    std::shared_ptr<Shared> shared_;
    bool full_logged_ = false; // the warning of the current run of refusals over max_connections is out
    bool stopped_ = false;
};

} // namespace canopy::daemon
