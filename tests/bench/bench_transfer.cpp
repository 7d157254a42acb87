// bench_transfer: putting 64 MiB into a posix_shm buffer of a running daemon, four ways, medians of 9 runs:
//   memcpy              baseline: the bytes copied into the buffer's own mapping, already mapped (the floor)
//   buffer.fd           ask for the fd (one request, answered after the tasks before it), map it, memcpy, unmap
//   attachment          one buffer.write whose 64 MiB follow the frame raw on the socket, sent with the C++
//                       client (client::Connection::write), which the daemon reads straight into the buffer
//   buffer.write chunks 128 requests of 512 KiB as base64 in JSON (the path before attachments)
// and the same for reading back (attachment: one buffer.read answered with the 64 MiB raw after the reply, read
// with Connection::read into the caller's memory). A line per attachment direction states the rate against the
// target of 1 GB/s. The service runs in this process (as canopyd runs it) with one sub.
#include "client/connection.h"
#include "ipc/fd_passing.h"
#include "ipc/mapped_region.h"
#include "protocol/base64.h"
#include "service_harness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace canopy;
using nlohmann::json;

namespace {

constexpr std::size_t BYTES = std::size_t{64} << 20;
constexpr std::size_t CHUNK = 512 * 1024;
constexpr int RUNS = 9;

// Sends one request and returns its reply, with the fds that came with it.
json call(int fd, const json& request, std::vector<ipc::UniqueFd>* fds = nullptr) {
    const std::string body = request.dump();
    std::string framed(4, '\0');
    const auto len = static_cast<std::uint32_t>(body.size());
    std::memcpy(framed.data(), &len, 4);
    framed += body;
    for (std::size_t at = 0; at < framed.size();) {
        const ssize_t w = ::write(fd, framed.data() + at, framed.size() - at);
        if (w <= 0) {
            throw std::runtime_error("write failed");
        }
        at += static_cast<std::size_t>(w);
    }
    std::vector<ipc::UniqueFd> received;
    std::string in;
    std::uint32_t n = 0;
    while (in.size() < 4 || in.size() < 4 + std::size_t{n}) {
        std::vector<char> chunk(in.size() < 4 ? 4 - in.size() : 4 + n - in.size());
        const std::size_t got = ipc::recv_message(fd, std::as_writable_bytes(std::span(chunk)), received);
        if (got == 0) {
            throw std::runtime_error("the daemon closed the connection");
        }
        in.append(chunk.data(), got);
        if (in.size() >= 4) {
            std::memcpy(&n, in.data(), 4);
        }
    }
    if (fds != nullptr) {
        *fds = std::move(received);
    }
    json reply = json::parse(in.substr(4));
    if (!reply.value("ok", false)) {
        throw std::runtime_error(reply.dump());
    }
    return reply;
}

// Median milliseconds of RUNS calls of `op`.
double median_ms(const std::function<void()>& op) {
    std::vector<double> ms;
    for (int i = 0; i < RUNS; ++i) {
        const auto start = std::chrono::steady_clock::now();
        op();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

void row(const char* what, double ms, double baseline) {
    std::printf("| %s | %.1f ms | %.2f GB/s | %.1fx |\n", what, ms, static_cast<double>(BYTES) / ms / 1e6,
                ms / baseline);
}

} // namespace

int main() {
    bench::ServiceHarness harness("canopy-bench-transfer", [](config::Config& cfg) { cfg.node.subs = 1; });
    const int fd = harness.fd();
    const std::string id = call(fd, {{"op", "buffer.create"}, {"bytes", BYTES}})["buffer"]["id"];
    std::string data(BYTES, '\0');
    for (std::size_t i = 0; i < BYTES; ++i) {
        data[i] = static_cast<char>(i * 2654435761u >> 24);
    }
    std::string back(BYTES, '\0');

    std::vector<ipc::UniqueFd> fds;
    call(fd, {{"op", "buffer.fd"}, {"buffer", id}}, &fds);
    ipc::MappedRegion mapped = ipc::MappedRegion::map_shared(fds.at(0).get(), BYTES, true);
    const double floor_put = median_ms([&] { std::memcpy(mapped.data(), data.data(), BYTES); });
    const double floor_get = median_ms([&] { std::memcpy(back.data(), mapped.data(), BYTES); });

    auto through_fd = [&](bool put) {
        std::vector<ipc::UniqueFd> got;
        call(fd, {{"op", "buffer.fd"}, {"buffer", id}, {"access", put ? "readwrite" : "read"}}, &got);
        ipc::MappedRegion region = ipc::MappedRegion::map_shared(got.at(0).get(), BYTES, put, true);
        if (put) {
            std::memcpy(region.data(), data.data(), BYTES);
        } else {
            std::memcpy(back.data(), region.data(), BYTES);
        }
    };
    const double fd_put = median_ms([&] { through_fd(true); });
    const double fd_get = median_ms([&] { through_fd(false); });
    if (back != data) {
        std::fprintf(stderr, "the bytes read back differ\n");
        return 1;
    }
    client::Connection connection = client::Connection::connect(harness.socket());
    const double attach_put = median_ms([&] { connection.write(id, 0, std::as_bytes(std::span(data))); });
    std::fill(back.begin(), back.end(), '\0');
    const double attach_get = median_ms([&] { connection.read(id, 0, std::as_writable_bytes(std::span(back))); });
    if (back != data) {
        std::fprintf(stderr, "the bytes read back through the attachment differ\n");
        return 1;
    }
    const double chunk_put = median_ms([&] {
        for (std::size_t at = 0; at < BYTES; at += CHUNK) {
            call(fd, {{"op", "buffer.write"},
                      {"buffer", id},
                      {"offset", at},
                      {"data", base64_encode(std::string_view(data).substr(at, CHUNK))}});
        }
    });
    const double chunk_get = median_ms([&] {
        for (std::size_t at = 0; at < BYTES; at += CHUNK) {
            const json reply = call(fd, {{"op", "buffer.read"}, {"buffer", id}, {"offset", at}, {"bytes", CHUNK}});
            const std::string bytes = base64_decode(reply["data"].get<std::string>());
            std::memcpy(back.data() + at, bytes.data(), bytes.size());
        }
    });

    std::printf("bench_transfer: 64 MiB into and out of a posix_shm buffer, median of %d runs, %d CPUs online\n\n",
                RUNS, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
    std::printf("| put | time | rate | ratio to memcpy |\n|---|---|---|---|\n");
    row("memcpy into the mapping (floor)", floor_put, floor_put);
    row("buffer.fd, map, memcpy", fd_put, floor_put);
    row("buffer.write, one 64 MiB attachment (C++ client)", attach_put, floor_put);
    row("buffer.write, 128 base64 chunks", chunk_put, floor_put);
    std::printf("\n| get | time | rate | ratio to memcpy |\n|---|---|---|---|\n");
    row("memcpy out of the mapping (floor)", floor_get, floor_get);
    row("buffer.fd, map, memcpy", fd_get, floor_get);
    row("buffer.read, one 64 MiB attachment (C++ client)", attach_get, floor_get);
    row("buffer.read, 128 base64 chunks", chunk_get, floor_get);
    const auto rate = [](double ms) { return static_cast<double>(BYTES) / ms / 1e6; };
    std::printf("\ntarget attachment >= 1 GB/s: put %s (%.2f GB/s), get %s (%.2f GB/s)\n",
                rate(attach_put) >= 1.0 ? "met" : "missed", rate(attach_put),
                rate(attach_get) >= 1.0 ? "met" : "missed", rate(attach_get));
    return 0;
}
