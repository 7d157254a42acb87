#include "tests/cli/fake_daemon.h"

#include "cli/app.h"

#include <array>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace canopy::cli::testing {

using nlohmann::json;

namespace {

bool read_exact(int fd, char* data, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::recv(fd, data + got, n - got, 0);
        if (r <= 0) {
            return false;
        }
        got += static_cast<std::size_t>(r);
    }
    return true;
}

void write_all(int fd, const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t r = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (r <= 0) {
            return;
        }
        sent += static_cast<std::size_t>(r);
    }
}

} // namespace

FakeReply ok(json payload) {
    payload["ok"] = true;
    return {std::move(payload), "", false, ""};
}

FakeReply ok_with(std::string bytes, json payload) {
    payload["ok"] = true;
    payload["attachment"] = bytes.size();
    return {std::move(payload), "", false, std::move(bytes)};
}

FakeReply error(const std::string& code, const std::string& message) {
    return {json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}}, "", false, ""};
}

FakeReply raw(std::string bytes, bool close_after) {
    return {std::nullopt, std::move(bytes), close_after, ""};
}

std::string frame_header(std::uint32_t n) {
    std::string header(4, '\0');
    for (std::size_t i = 0; i < 4; ++i) {
        header[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    }
    return header;
}

std::string frame(const std::string& body) {
    return frame_header(static_cast<std::uint32_t>(body.size())) + body;
}

FakeDaemon::FakeDaemon(Handler handler)
    : FakeDaemon(AttachmentHandler(
          [handler = std::move(handler)](const json& request, const std::string&) { return handler(request); })) {}

FakeDaemon::FakeDaemon(AttachmentHandler handler) : handler_(std::move(handler)) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "canopy-cli-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    dir_ = tmpl;
    socket_path_ = dir_ + "/control.sock";
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_path_.c_str(), socket_path_.size());
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 8) != 0 || ::pipe2(stop_pipe_, O_CLOEXEC) != 0) {
        throw std::runtime_error("fake daemon: cannot listen on " + socket_path_);
    }
    thread_ = std::thread([this] { serve(); });
}

FakeDaemon::~FakeDaemon() {
    const char byte = 0;
    (void)!::write(stop_pipe_[1], &byte, 1);
    thread_.join();
    ::close(listen_fd_);
    ::close(stop_pipe_[0]);
    ::close(stop_pipe_[1]);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::vector<json> FakeDaemon::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

std::vector<std::string> FakeDaemon::attachments() const {
    std::lock_guard lock(mutex_);
    return attachments_;
}

// True when `fd` is readable; false when the stop pipe is.
bool FakeDaemon::wait_readable(int fd) const {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    while (::poll(fds, 2, -1) < 0) {
    }
    return (fds[1].revents & POLLIN) == 0;
}

void FakeDaemon::serve() {
    while (wait_readable(listen_fd_)) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
            serve_connection(fd);
            ::close(fd);
        }
    }
}

void FakeDaemon::serve_connection(int fd) {
    while (wait_readable(fd)) {
        std::array<unsigned char, 4> header{};
        if (!read_exact(fd, reinterpret_cast<char*>(header.data()), header.size())) {
            return;
        }
        const std::uint32_t n = std::uint32_t{header[0]} | std::uint32_t{header[1]} << 8 |
                                std::uint32_t{header[2]} << 16 | std::uint32_t{header[3]} << 24;
        std::string body(n, '\0');
        if (!read_exact(fd, body.data(), body.size())) {
            return;
        }
        const json request = json::parse(body, nullptr, false);
        const json id = request.is_object() && request.contains("id") ? request["id"] : json();
        const bool attached = request.is_object() && request.value("op", "") == "buffer.write" &&
                              request.contains("attachment") && request["attachment"].is_number_unsigned();
        std::string attachment(attached ? request["attachment"].get<std::size_t>() : 0, '\0');
        if (!read_exact(fd, attachment.data(), attachment.size())) {
            return;
        }
        {
            std::lock_guard lock(mutex_);
            requests_.push_back(request);
            if (attached) {
                attachments_.push_back(attachment);
            }
        }
        FakeReply reply = handler_(request, attachment);
        if (reply.body) {
            if (!id.is_null()) {
                (*reply.body)["id"] = id;
            }
            write_all(fd, frame(reply.body->dump()) + reply.attachment);
        } else {
            write_all(fd, reply.raw);
        }
        if (reply.close_after) {
            return;
        }
    }
}

Environment test_env() {
    Environment env;
    return env;
}

CliRun run(std::vector<std::string> args, const std::string& socket, const Environment& env) {
    if (!socket.empty()) {
        args.push_back("--socket");
        args.push_back(socket);
    }
    std::ostringstream out;
    std::ostringstream err;
    CliRun result;
    result.rc = run_cli(args, out, err, env);
    result.out = out.str();
    result.err = err.str();
    return result;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& content) {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
}

std::string read_whole_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

nlohmann::json only_request(FakeDaemon::Handler handler, const std::vector<std::string>& args) {
    FakeDaemon daemon(std::move(handler));
    const CliRun r = run(args, daemon.socket_path());
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto requests = daemon.requests();
    REQUIRE(requests.size() == 1);
    return requests[0];
}

} // namespace canopy::cli::testing
