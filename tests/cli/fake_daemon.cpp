#include "tests/cli/fake_daemon.h"

#include "cli/app.h"
#include "cli/frame.h"

#include <array>
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
    return {std::move(payload), "", false};
}

FakeReply error(const std::string& code, const std::string& message) {
    return {json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}}, "", false};
}

FakeReply raw(std::string bytes, bool close_after) {
    return {std::nullopt, std::move(bytes), close_after};
}

FakeDaemon::FakeDaemon(Handler handler) : handler_(std::move(handler)) {
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
        std::array<char, FRAME_HEADER_BYTES> header{};
        if (!read_exact(fd, header.data(), header.size())) {
            return;
        }
        std::string body(decode_frame_header(header), '\0');
        if (!read_exact(fd, body.data(), body.size())) {
            return;
        }
        const json request = json::parse(body, nullptr, false);
        const json id = request.is_object() && request.contains("id") ? request["id"] : json();
        {
            std::lock_guard lock(mutex_);
            requests_.push_back(request);
        }
        FakeReply reply = handler_(request);
        if (reply.body) {
            if (!id.is_null()) {
                (*reply.body)["id"] = id;
            }
            write_all(fd, encode_frame(reply.body->dump()));
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

} // namespace canopy::cli::testing
