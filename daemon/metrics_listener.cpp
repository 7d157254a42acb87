#include "daemon/metrics_listener.h"

// clang-format off
#include <utility>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
// clang-format on

namespace canopy::daemon {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
constexpr std::size_t MAX_HEAD_BYTES = 8192;
} // namespace

HttpAnswer answer_request_line(std::string_view head) {
    const std::string_view line = head.substr(0, head.find("\r\n"));
    const auto first = line.find(' ');
    const auto last = line.rfind(' ');
    if (first == std::string_view::npos || last == first || !line.substr(last + 1).starts_with("HTTP/")) {
        return {400, "Bad Request"};
    }
    const std::string_view method = line.substr(0, first);
    std::string_view target = line.substr(first + 1, last - first - 1);
    target = target.substr(0, target.find_first_of("?#")); // a query string asks for the same page
    if (target != "/metrics") {
        return {404, "Not Found"};
    }
    if (method != "GET") {
        return {405, "Method Not Allowed"};
    }
    return {200, "OK"};
}

class MetricsListener::Exchange : public std::enable_shared_from_this<Exchange> {
public:
    Exchange(tcp::socket socket, Render render, const MetricsLimits& limits, std::shared_ptr<Shared> shared)
        : socket_(std::move(socket)), timer_(socket_.get_executor()), render_(std::move(render)), limits_(limits),
          shared_(std::move(shared)) {
        ++shared_->open;
    }
    ~Exchange() { --shared_->open; }

    void start() {
        arm(limits_.head_timeout);
        asio::async_read_until(
            socket_, asio::dynamic_buffer(head_, MAX_HEAD_BYTES), "\r\n\r\n",
            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) { self->respond(ec); });
    }

private:
    // Closes the connection unless the step under way ends within `limit`.
    void arm(std::chrono::milliseconds limit) {
        timer_.expires_after(limit);
        timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
            if (!ec) {
                self->close();
            }
        });
    }

    void close() {
        boost::system::error_code ignored;
        timer_.cancel();
        socket_.shutdown(tcp::socket::shutdown_both, ignored);
        socket_.close(ignored);
    }

    void respond(const boost::system::error_code& ec) {
        if (ec) {
            close(); // a timeout, a head over MAX_HEAD_BYTES, or the client went away
            return;
        }
        const HttpAnswer answer = answer_request_line(head_);
        std::string body = answer.status == 200 ? render_() : std::string(answer.reason) + "\n";
        reply_ = "HTTP/1.0 " + std::to_string(answer.status) + " " + std::string(answer.reason) + "\r\n" +
                 (answer.status == 405 ? "Allow: GET\r\n" : "") +
                 "Content-Type: text/plain; version=0.0.4\r\nContent-Length: " + std::to_string(body.size()) +
                 "\r\nConnection: close\r\n\r\n" + body;
        arm(limits_.write_timeout);
        asio::async_write(
            socket_, asio::buffer(reply_),
            [self = shared_from_this()](const boost::system::error_code&, std::size_t) { self->close(); });
    }

    tcp::socket socket_;
    asio::steady_timer timer_;
    Render render_;
    MetricsLimits limits_;
    std::shared_ptr<Shared> shared_;
    std::string head_;
    std::string reply_;
};

MetricsListener::MetricsListener(asio::io_context& io, const tcp::endpoint& endpoint, Render render,
                                 MetricsLimits limits, std::shared_ptr<spdlog::logger> log)
    : acceptor_(io, endpoint), render_(std::move(render)), limits_(limits), log_(std::move(log)),
      backoff_(io, "metrics listener " + endpoint.address().to_string() + ":" + std::to_string(endpoint.port()),
               limits_.accept_backoff, log_),
      shared_(std::make_shared<Shared>()) {}

MetricsListener::~MetricsListener() = default;

void MetricsListener::start() {
    do_accept();
}

void MetricsListener::do_accept() {
    backoff_.accept_loop(acceptor_, stopped_, [this](tcp::socket socket) { admit(std::move(socket)); });
}

void MetricsListener::admit(tcp::socket socket) {
    if (shared_->open >= limits_.max_connections) {
        if (!full_logged_) {
            full_logged_ = true;
            log_->warn("metrics listener: {} connections open, the most it serves; closing new ones until one ends",
                       shared_->open);
        }
        boost::system::error_code ignored;
        socket.close(ignored);
        return;
    }
    full_logged_ = false;
    std::make_shared<Exchange>(std::move(socket), render_, limits_, shared_)->start();
}

void MetricsListener::stop() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    backoff_.cancel();
    boost::system::error_code ignored;
    acceptor_.close(ignored);
}

std::size_t MetricsListener::connections() const noexcept {
    return shared_->open;
}

tcp::endpoint MetricsListener::local_endpoint() const {
    return acceptor_.local_endpoint();
}

} // namespace canopy::daemon
