#pragma once
// Client: one blocking connection to canopyd's control socket, speaking docs/control-protocol.md.
//
// call() sends one request frame and reads its reply. A request without an "id" gets the next integer
// (1, 2, ...); the buffer operations carry the buffer's ID under "id" and keep it, since the protocol uses
// that one key for both. A reply whose "id" is present, not null and not the request's is a protocol
// error. The connection stays
// open for further calls until the Client is destroyed. SIGPIPE is never raised: a peer that closed the
// socket shows up as a protocol_error.
//
// Ownership: owns the socket. Move-only. Thread safety: one thread at a time.

#include "ipc/unique_fd.h"

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace canopy::cli {

class Client {
public:
    // Connects to the Unix socket at `socket_path`. Throws unreachable_error naming the path and the errno
    // text, or usage_error for a path that does not fit sockaddr_un.
    static Client connect(const std::string& socket_path);

    // Sends `request` (a JSON object with "op") and returns the reply's payload: the reply object without
    // "id" and "ok". Progress frames before the reply ({"id", "progress"}, no "ok") go to `on_progress`.
    // Throws request_error(code, message) for an {"ok": false} reply and protocol_error when the stream
    // breaks or the reply is not a well-formed frame holding a reply object.
    using ProgressHandler = std::function<void(const nlohmann::json& progress)>;
    nlohmann::json call(nlohmann::json request, const ProgressHandler& on_progress = {});

    const std::string& socket_path() const noexcept { return socket_path_; }
    // The file descriptors that replies carried (buffer.fd), in arrival order, taken out of the client.
    std::vector<ipc::UniqueFd> take_fds() noexcept { return std::exchange(received_fds_, {}); }

private:
    Client(ipc::UniqueFd fd, std::string socket_path) : fd_(std::move(fd)), socket_path_(std::move(socket_path)) {}

    void send_all(const std::string& bytes);
    // False when the peer closed the stream before the first byte; throws protocol_error when it closes
    // after part of `n` bytes.
    bool receive_exact(char* data, std::size_t n);
    // The next reply body; throws protocol_error for EOF or a length outside [MIN_FRAME_BODY, MAX_REPLY_BODY].
    std::string receive_frame(std::string_view op);
    // The reply's payload; nullopt for a progress frame of this request, which went to `on_progress`.
    std::optional<nlohmann::json> check_reply(const std::string& body, const nlohmann::json& id, std::string_view op,
                                              const ProgressHandler& on_progress) const;

    ipc::UniqueFd fd_;
    std::string socket_path_;
    std::vector<ipc::UniqueFd> received_fds_;
    std::uint64_t next_id_ = 1;
};

} // namespace canopy::cli
