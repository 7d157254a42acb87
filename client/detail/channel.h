#pragma once
// Channel: one blocking connection to canopyd's control socket, speaking the framing and the request/reply rules
// of docs/control-protocol.md. Connection builds its typed calls on it, and the futures wait over channels of
// their own.
//
// call() sends one request frame (and the raw bytes of its attachment, if any) and reads frames until the reply:
// progress frames ({"id", "progress"}, no "ok") go to the handler, the reply's payload (the object without "id"
// and "ok") is returned, an {"ok": false} reply is thrown as Error. A request without "id" gets the next integer
// (1, 2, ...); a reply whose "id" is present, not null and not the request's is a ProtocolError. A reply that
// announces an attachment leaves its bytes on the stream for receive_attachment(). Replies may carry fds
// (buffer.fd); they are kept until take_fds(). SIGPIPE is never raised.
//
// Ownership: owns the socket. Move-only. Thread safety: one thread at a time.

#include "client/error.h"
#include "ipc/unique_fd.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace canopy::client::detail {

inline constexpr std::size_t FRAME_HEADER_BYTES = 4;
// The smallest body a frame may carry ("{}").
inline constexpr std::uint32_t MIN_FRAME_BODY = 2;
// The largest reply body accepted: replies are far smaller (a 512 KiB base64 read is about 700 KiB); the bound keeps
// a corrupt length from making the client allocate gigabytes.
inline constexpr std::uint32_t MAX_REPLY_BODY = 64u << 20;

// The 4-byte little-endian length, then `body`. Throws std::length_error past 2^32 - 1 bytes.
std::string encode_frame(std::string_view body);

class Channel {
public:
    using ProgressHandler = std::function<void(const nlohmann::json& progress)>;

    // Connects to the Unix socket at `path`. Throws std::invalid_argument for a path that does not fit sockaddr_un
    // ("a socket path has 1 to 107 bytes, not 200") and ConnectError naming the path and the errno text.
    static Channel connect(const std::string& path);

    nlohmann::json call(nlohmann::json request, std::span<const std::byte> attachment = {},
                        const ProgressHandler& on_progress = {});
    // Reads the `into.size()` raw bytes of the attachment the last reply announced. Throws ProtocolError when the
    // stream ends first.
    void receive_attachment(std::span<std::byte> into, std::string_view op);

    const std::string& path() const noexcept { return path_; }
    // The fds that replies carried, in arrival order, taken out of the channel.
    std::vector<ipc::UniqueFd> take_fds() noexcept { return std::exchange(fds_, {}); }

private:
    Channel(ipc::UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

    void send_all(std::span<const std::byte> bytes);
    // False when the peer closed the stream before the first byte; throws ProtocolError when it closes after part of
    // `n` bytes, naming `what` they are ("a frame").
    bool receive_exact(std::byte* data, std::size_t n, const char* what = "a frame");
    std::string receive_frame(std::string_view op);
    // The reply's payload; nullopt for a progress frame of this request, which went to `on_progress`.
    std::optional<nlohmann::json> check_reply(const std::string& body, const nlohmann::json& id, std::string_view op,
                                              const ProgressHandler& on_progress) const;

    ipc::UniqueFd fd_;
    std::string path_;
    std::vector<ipc::UniqueFd> fds_;
    std::uint64_t next_id_ = 1;
};

} // namespace canopy::client::detail
