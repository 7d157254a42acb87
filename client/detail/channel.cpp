#include "client/detail/channel.h"

#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <system_error>

namespace canopy::client::detail {

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

std::uint32_t decode_length(const std::array<std::byte, FRAME_HEADER_BYTES>& header) noexcept {
    std::uint32_t n = 0;
    for (std::size_t i = 0; i < FRAME_HEADER_BYTES; ++i) {
        n |= std::to_integer<std::uint32_t>(header[i]) << (8 * i);
    }
    return n;
}

} // namespace

std::string encode_frame(std::string_view body) {
    if (body.size() > UINT32_MAX) {
        throw std::length_error("a request of " + std::to_string(body.size()) + " bytes does not fit a frame");
    }
    const auto n = static_cast<std::uint32_t>(body.size());
    std::string frame(FRAME_HEADER_BYTES, '\0');
    for (std::size_t i = 0; i < FRAME_HEADER_BYTES; ++i) {
        frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    }
    frame += body;
    return frame;
}

Channel Channel::connect(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
        throw std::invalid_argument("a socket path has 1 to " + std::to_string(sizeof(addr.sun_path) - 1) +
                                    " bytes, not " + std::to_string(path.size()));
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    ipc::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
        const int err = errno;
        throw ConnectError(path, err, "cannot create a socket to connect to " + path + ": " + errno_text(err));
    }
    try {
        ipc::sys_retry("connect",
                       [&] { return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)); });
    } catch (const ipc::SysError& e) {
        throw ConnectError(path, e.err(), "cannot connect to " + path + ": " + errno_text(e.err()));
    }
    return Channel(std::move(fd), path);
}

json Channel::call(json request, std::span<const std::byte> attachment, const ProgressHandler& on_progress) {
    if (!request.contains("id")) {
        request["id"] = next_id_++;
    }
    const json id = request["id"];
    const std::string op = request.value("op", "");
    const std::string frame = encode_frame(request.dump(-1, ' ', false, json::error_handler_t::replace));
    std::optional<ProtocolError> send_failure;
    try {
        send_all(std::as_bytes(std::span(frame)));
        send_all(attachment);
    } catch (const ProtocolError& e) {
        // A daemon that refuses a frame or an attachment replies before it closes; that reply says more than EPIPE.
        send_failure = e;
    }
    for (;;) {
        std::string body;
        try {
            body = receive_frame(op);
        } catch (const ProtocolError&) {
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

void Channel::receive_attachment(std::span<std::byte> into, std::string_view op) {
    if (!into.empty() && !receive_exact(into.data(), into.size(), "an attachment")) {
        throw ProtocolError("canopyd closed the connection before the attachment of the reply to \"" + std::string(op) +
                            "\" (0 of " + std::to_string(into.size()) + " bytes)");
    }
}

void Channel::send_all(std::span<const std::byte> bytes) {
    std::size_t sent = 0;
    try {
        while (sent < bytes.size()) {
            const ssize_t n = ipc::sys_retry(
                "send", [&] { return ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL); });
            sent += static_cast<std::size_t>(n);
        }
    } catch (const ipc::SysError& e) {
        throw ProtocolError("sending a request to " + path_ + ": " + errno_text(e.err()));
    }
}

bool Channel::receive_exact(std::byte* data, std::size_t n, const char* what) {
    std::size_t got = 0;
    try {
        while (got < n) {
            // recvmsg, not recv: a reply may carry file descriptors (buffer.fd), which arrive with its first byte.
            const std::size_t r = ipc::recv_message(fd_.get(), std::span(data + got, n - got), fds_);
            if (r == 0) {
                if (got == 0) {
                    return false;
                }
                throw ProtocolError("canopyd closed the connection in the middle of " + std::string(what) + " (" +
                                    std::to_string(got) + " of " + std::to_string(n) + " bytes)");
            }
            got += r;
        }
    } catch (const ipc::SysError& e) {
        throw ProtocolError("receiving a reply from " + path_ + ": " + errno_text(e.err()));
    }
    return true;
}

std::string Channel::receive_frame(std::string_view op) {
    std::array<std::byte, FRAME_HEADER_BYTES> header{};
    if (!receive_exact(header.data(), header.size())) {
        throw ProtocolError("canopyd closed the connection without replying to \"" + std::string(op) + "\"");
    }
    const std::uint32_t n = decode_length(header);
    if (n < MIN_FRAME_BODY || n > MAX_REPLY_BODY) {
        throw ProtocolError("the reply to \"" + std::string(op) + "\" has frame length " + std::to_string(n) +
                            ", outside [" + std::to_string(MIN_FRAME_BODY) + ", " + std::to_string(MAX_REPLY_BODY) +
                            "]");
    }
    std::string body(n, '\0');
    if (!receive_exact(reinterpret_cast<std::byte*>(body.data()), body.size())) {
        throw ProtocolError("canopyd closed the connection after the header of the reply to \"" + std::string(op) +
                            "\"");
    }
    return body;
}

std::optional<json> Channel::check_reply(const std::string& body, const json& id, std::string_view op,
                                         const ProgressHandler& on_progress) const {
    const std::string what = "the reply to \"" + std::string(op) + "\"";
    json reply;
    try {
        reply = json::parse(body);
    } catch (const json::parse_error& e) {
        throw ProtocolError(what + " is not JSON (" + excerpt(body) + "): " + e.what());
    }
    if (!reply.is_object()) {
        throw ProtocolError(what + " is not a JSON object: " + excerpt(body));
    }
    if (reply.contains("id") && !reply["id"].is_null() && reply["id"] != id) {
        throw ProtocolError(what + " carries id " + reply["id"].dump() + ", expected " + id.dump());
    }
    if (!reply.contains("ok") && reply.contains("progress")) {
        if (on_progress) {
            on_progress(reply["progress"]);
        }
        return std::nullopt;
    }
    if (!reply.contains("ok") || !reply["ok"].is_boolean()) {
        throw ProtocolError(what + " has no boolean \"ok\": " + excerpt(body));
    }
    if (!reply["ok"].get<bool>()) {
        const json error = reply.value("error", json::object());
        if (!error.is_object() || !error.contains("code") || !error["code"].is_string()) {
            throw ProtocolError(what + " is a failure without an error code: " + excerpt(body));
        }
        const json message = error.value("message", json(""));
        const std::string name = error["code"].get<std::string>();
        throw Error(error_code_from_name(name).value_or(ErrorCode::OK), name,
                    message.is_string() ? message.get<std::string>() : message.dump());
    }
    reply.erase("id");
    reply.erase("ok");
    return reply;
}

} // namespace canopy::client::detail
