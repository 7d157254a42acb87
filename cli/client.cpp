#include "cli/client.h"

#include "cli/cli_error.h"
#include "cli/frame.h"
#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <cerrno>
#include <cstring>
#include <span>
#include <sys/socket.h>
#include <sys/un.h>
#include <system_error>

namespace canopy::cli {

namespace {

using nlohmann::json;

std::string errno_text(int err) {
    return std::generic_category().message(err);
}

// A short, printable excerpt of a reply body for error messages.
std::string excerpt(const std::string& body) {
    constexpr std::size_t MAX = 60;
    std::string out;
    for (char c : body.substr(0, MAX)) {
        const auto u = static_cast<unsigned char>(c);
        out += (u >= 0x20 && u < 0x7f) ? c : '?';
    }
    return body.size() > MAX ? out + "..." : out;
}

} // namespace

Client Client::connect(const std::string& socket_path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
        throw usage_error("--socket \"" + socket_path + "\": a socket path has 1 to " +
                          std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
    }
    std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
    ipc::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
        throw unreachable_error("cannot create a socket to connect to " + socket_path + ": " + errno_text(errno));
    }
    try {
        ipc::sys_retry("connect",
                       [&] { return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)); });
    } catch (const ipc::SysError& e) {
        throw unreachable_error("cannot connect to " + socket_path + ": " + errno_text(e.err()) +
                                " (is canopyd running? set --socket or CANOPY_SOCKET)");
    }
    return Client(std::move(fd), socket_path);
}

json Client::call(json request, const ProgressHandler& on_progress) {
    if (!request.contains("id")) {
        request["id"] = next_id_++;
    }
    const json id = request["id"];
    const std::string op = request.value("op", "");
    const std::string frame = encode_frame(request.dump(-1, ' ', false, json::error_handler_t::replace));
    std::optional<CliError> send_failure;
    try {
        send_all(frame);
    } catch (const CliError& e) {
        // A daemon that refuses a frame replies before it closes; that reply says more than EPIPE.
        send_failure = e;
    }
    for (;;) {
        std::string body;
        try {
            body = receive_frame(op);
        } catch (const CliError&) {
            if (send_failure) {
                throw *send_failure;
            }
            throw;
        }
        if (auto reply = check_reply(body, id, op, on_progress)) {
            return std::move(*reply);
        }
    }
}

void Client::send_all(const std::string& bytes) {
    std::size_t sent = 0;
    try {
        while (sent < bytes.size()) {
            const ssize_t n = ipc::sys_retry(
                "send", [&] { return ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL); });
            sent += static_cast<std::size_t>(n);
        }
    } catch (const ipc::SysError& e) {
        throw protocol_error("sending a request to " + socket_path_ + ": " + errno_text(e.err()));
    }
}

bool Client::receive_exact(char* data, std::size_t n) {
    std::size_t got = 0;
    try {
        while (got < n) {
            // recvmsg, not recv: a reply may carry file descriptors (buffer.fd), which arrive with its first byte.
            const auto r = static_cast<ssize_t>(
                ipc::recv_message(fd_.get(), std::as_writable_bytes(std::span(data + got, n - got)), received_fds_));
            if (r == 0) {
                if (got == 0) {
                    return false;
                }
                throw protocol_error("canopyd closed the connection in the middle of a frame (" + std::to_string(got) +
                                     " of " + std::to_string(n) + " bytes)");
            }
            got += static_cast<std::size_t>(r);
        }
    } catch (const ipc::SysError& e) {
        throw protocol_error("receiving a reply from " + socket_path_ + ": " + errno_text(e.err()));
    }
    return true;
}

std::string Client::receive_frame(std::string_view op) {
    std::array<char, FRAME_HEADER_BYTES> header{};
    if (!receive_exact(header.data(), header.size())) {
        throw protocol_error("canopyd closed the connection without replying to \"" + std::string(op) + "\"");
    }
    const std::uint32_t n = decode_frame_header(header);
    if (n < MIN_FRAME_BODY || n > MAX_REPLY_BODY) {
        throw protocol_error("the reply to \"" + std::string(op) + "\" has frame length " + std::to_string(n) +
                             ", outside [" + std::to_string(MIN_FRAME_BODY) + ", " + std::to_string(MAX_REPLY_BODY) +
                             "]");
    }
    std::string body(n, '\0');
    if (!receive_exact(body.data(), body.size())) {
        throw protocol_error("canopyd closed the connection after the header of the reply to \"" + std::string(op) +
                             "\"");
    }
    return body;
}

std::optional<json> Client::check_reply(const std::string& body, const json& id, std::string_view op,
                                        const ProgressHandler& on_progress) const {
    const std::string what = "the reply to \"" + std::string(op) + "\"";
    json reply;
    try {
        reply = json::parse(body);
    } catch (const json::parse_error& e) {
        throw protocol_error(what + " is not JSON (" + excerpt(body) + "): " + e.what());
    }
    if (!reply.is_object()) {
        throw protocol_error(what + " is not a JSON object: " + excerpt(body));
    }
    if (reply.contains("id") && !reply["id"].is_null() && reply["id"] != id) {
        throw protocol_error(what + " carries id " + reply["id"].dump() + ", expected " + id.dump());
    }
    if (!reply.contains("ok") && reply.contains("progress")) {
        if (on_progress) {
            on_progress(reply["progress"]);
        }
        return std::nullopt;
    }
    if (!reply.contains("ok") || !reply["ok"].is_boolean()) {
        throw protocol_error(what + " has no boolean \"ok\": " + excerpt(body));
    }
    if (!reply["ok"].get<bool>()) {
        const json error = reply.value("error", json::object());
        if (!error.is_object() || !error.contains("code") || !error["code"].is_string()) {
            throw protocol_error(what + " is a failure without an error code: " + excerpt(body));
        }
        const json message = error.value("message", json(""));
        throw request_error(error["code"].get<std::string>(),
                            message.is_string() ? message.get<std::string>() : message.dump());
    }
    reply.erase("id");
    reply.erase("ok");
    return reply;
}

} // namespace canopy::cli
