#include "daemon/accept_backoff.h"

namespace canopy::daemon {

AcceptBackoff::AcceptBackoff(boost::asio::io_context& io, std::string listener, std::chrono::milliseconds pause,
                             std::shared_ptr<spdlog::logger> log)
    : timer_(io), listener_(std::move(listener)), pause_(pause), log_(std::move(log)) {}

void AcceptBackoff::failed(const boost::system::error_code& ec, std::function<void()> retry) {
    if (failures_++ == 0) {
        log_->warn("{}: accept failed: {}; accepting again every {} ms until it succeeds", listener_, ec.message(),
                   pause_.count());
    }
    timer_.expires_after(pause_);
    timer_.async_wait([retry = std::move(retry)](const boost::system::error_code& wait) {
        if (!wait) {
            retry();
        }
    });
}

void AcceptBackoff::succeeded() {
    if (failures_ > 0) {
        log_->info("{}: accepting again after {} failed accept{}", listener_, failures_, failures_ == 1 ? "" : "s");
        failures_ = 0;
    }
}

void AcceptBackoff::cancel() {
    timer_.cancel();
}

} // namespace canopy::daemon
