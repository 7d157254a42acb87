#pragma once
// Connection: a client of canopyd's control socket (docs/control-protocol.md) with one typed call per request.
//
//   auto c = canopy::client::Connection::connect();            // $CANOPY_SOCKET, else /run/canopy/canopy.sock
//   BufferInfo b = c.create_buffer({.bytes = 4096});
//   c.write(b.id, 0, bytes);                                   // the bytes travel as an attachment
//   TaskFuture f = c.submit(Task("fill", "sub0").output(View(b.id, "float32", {1024})).scalar(Scalar::float32(1)));
//   f.get();                                                   // throws TaskError if it failed
//   BufferMapping m = c.map(b.id, MapAccess::READ);            // the bytes, without a copy
//
// Every call sends one request and blocks until its reply (submit and run with wait, and wait, until the tasks
// finish). A refusal is thrown as Error (code and message); a broken stream or a malformed reply as ProtocolError;
// the connection stays usable after an Error. Bytes move without base64: write() sends them as the request's
// attachment, read() receives them as the reply's, each in one request whatever their size (within
// control.max_attachment_bytes), and map() maps the buffer's own pages (posix_shm, sim_vmm).
//
// request() sends any request object as it is and returns the reply's payload, for what the typed calls do not
// cover.
//
// Ownership: owns its socket and shares a pool of wait connections with its futures (client/future.h). Move-only.
// Thread safety: one thread at a time per Connection; use one Connection per thread.

#include "client/buffer_mapping.h"
#include "client/future.h"
#include "client/task.h"
#include "client/types.h"
#include "ipc/unique_fd.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace canopy::client {

namespace detail {
class Channel;
}

// The socket when none is given: $CANOPY_SOCKET when set and not empty, else DEFAULT_SOCKET.
inline constexpr const char* DEFAULT_SOCKET = "/run/canopy/canopy.sock";
std::string default_socket_path();

// What buffer.fd hands over: the buffer, whether the fds are writable, and one fd per rank (O_CLOEXEC), e.g. to
// import a cuda_vmm allocation on a GPU (cuMemImportFromShareableHandle).
struct BufferFds {
    BufferInfo buffer;
    bool writable = false;
    std::vector<ipc::UniqueFd> fds;
};

class Connection {
public:
    using ProgressHandler = std::function<void(const nlohmann::json& progress)>;

    // Throws std::invalid_argument for a path that does not fit a Unix socket address, ConnectError when nothing
    // accepts on it.
    static Connection connect(const std::string& socket_path = default_socket_path());

    Connection(Connection&&) noexcept;
    Connection& operator=(Connection&&) noexcept;
    ~Connection();

    const std::string& socket_path() const noexcept;

    // Any request ({"op": ...}); its reply without "id" and "ok". Progress frames go to `on_progress`.
    nlohmann::json request(nlohmann::json request, const ProgressHandler& on_progress = {});

    // The daemon and its workers.
    Status status();
    void restart_worker(const std::string& worker);
    std::string metrics();
    void shutdown();

    // Buffers.
    BufferInfo create_buffer(const BufferSpec& spec);
    std::vector<BufferInfo> list_buffers();
    BufferInfo show_buffer(const std::string& id);
    // The daemon's warning when the release could not unlink the buffer's object (it still succeeded).
    std::optional<std::string> release_buffer(const std::string& id);
    // Writes `bytes` at `offset`, ordered with tasks as a task over those bytes; returns when they are in the
    // buffer.
    void write(const std::string& id, std::uint64_t offset, std::span<const std::byte> bytes);
    // Reads up to into.size() bytes from `offset` into `into`; fewer (cut_short) where the buffer ends first.
    ReadResult read(const std::string& id, std::uint64_t offset, std::span<std::byte> into);
    // Reads from `offset` to the end of the buffer, or `bytes` bytes (fewer where the buffer ends first).
    std::vector<std::byte> read(const std::string& id, std::uint64_t offset = 0,
                                std::optional<std::uint64_t> bytes = std::nullopt);
    // buffer.fd: the buffer's fds, once earlier tasks over it have finished.
    BufferFds buffer_fds(const std::string& id, MapAccess access = MapAccess::READWRITE);
    // buffer.fd, mapped. A cuda_vmm buffer (device memory) or a preloaded arena cannot be mapped here: Error
    // (BAD_REQUEST) naming why; use buffer_fds, write and read.
    BufferMapping map(const std::string& id, MapAccess access = MapAccess::READWRITE);

    // Tasks. submit and run reply at once (the future waits over its own connection); *_wait reply when every task
    // has finished, in one request whatever the graph's size.
    TaskFuture submit(const Task& task);
    TaskState submit_wait(const Task& task);
    GraphFuture run(const Graph& graph);
    // `on_progress`, when given, gets the daemon's progress frames ({"done", "failed", "total"}, at most four a
    // second while tasks finish).
    std::vector<TaskState> run_wait(const Graph& graph, const ProgressHandler& on_progress = {});
    WaitResult wait(const std::vector<std::uint64_t>& ids,
                    std::optional<std::chrono::milliseconds> timeout = std::nullopt);
    std::vector<CancelOutcome> cancel(const std::vector<std::uint64_t>& ids);
    std::vector<TaskState> tasks();

    // Modules (cuda chips): the image's bytes (PTX, cubin or fatbin); `format` is checked against them by the daemon.
    ModuleInfo load_module(const std::string& name, std::span<const std::byte> image, const std::string& format = "");
    std::vector<ModuleInfo> modules();

private:
    explicit Connection(std::unique_ptr<detail::Channel> channel);
    const std::shared_ptr<detail::WaitPool>& pool();

    std::unique_ptr<detail::Channel> channel_;
    std::shared_ptr<detail::WaitPool> pool_;
};

} // namespace canopy::client
