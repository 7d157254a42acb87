#include "cli/transfer.h"

#include "cli/cli_error.h"
#include "ipc/mapped_region.h"
#include "protocol/base64.h"

#include <algorithm>
#include <istream>
#include <optional>
#include <ostream>

namespace canopy::cli {

namespace {

using nlohmann::json;

std::string range_text(std::uint64_t offset, std::size_t n) {
    return "[" + std::to_string(offset) + ", " + std::to_string(offset + n) + ")";
}

// The next chunk of `in`, at most `chunk` bytes; shorter only at the end of the stream.
std::string next_chunk(std::istream& in, std::size_t chunk) {
    std::string data(chunk, '\0');
    in.read(data.data(), static_cast<std::streamsize>(chunk));
    data.resize(static_cast<std::size_t>(in.gcount()));
    return data;
}

// Buffer `id` mapped through buffer.fd, or nullopt where the daemon hands out no fd that maps here (a device
// buffer of a cuda chip, a preloaded arena, a daemon without buffer.fd): the caller then moves the bytes in
// chunks, whose requests give any refusal in their own words. The hand-over waits for earlier tasks over the
// buffer, so the mapping sees their results, and tasks submitted later see what is written through it.
std::optional<ipc::MappedRegion> map_buffer(Client& client, const std::string& id, bool writable,
                                            std::uint64_t& nbytes) {
    json reply;
    try {
        reply = client.call({{"op", "buffer.fd"}, {"buffer", id}, {"access", writable ? "readwrite" : "read"}});
    } catch (const CliError& e) {
        if (e.code() == "BAD_REQUEST" || e.code() == "ACCESS_DENIED") {
            client.take_fds();
            return std::nullopt;
        }
        throw;
    }
    std::vector<ipc::UniqueFd> fds = client.take_fds();
    const json backend = reply.value("buffer", json::object()).value("backend", json());
    const json size = reply.value("bytes", json());
    if (fds.size() != 1 || !size.is_number_unsigned() || (backend != "posix_shm" && backend != "sim_vmm")) {
        return std::nullopt;
    }
    nbytes = size.get<std::uint64_t>();
    return ipc::MappedRegion::map_shared(fds[0].get(), static_cast<std::size_t>(nbytes), writable, true);
}

[[noreturn]] void past_end(const char* verb, std::uint64_t n, std::uint64_t offset, std::uint64_t nbytes) {
    throw request_error("BAD_REQUEST", std::string(verb) + " " + std::to_string(n) + " bytes at offset " +
                                           std::to_string(offset) + " runs past the end of the " +
                                           std::to_string(nbytes) + "-byte buffer");
}

void check_offset(std::uint64_t offset, std::uint64_t nbytes) {
    if (offset > nbytes) {
        throw request_error("BAD_REQUEST", "offset " + std::to_string(offset) + " is past the end of the " +
                                               std::to_string(nbytes) + "-byte buffer");
    }
}

} // namespace

TransferResult write_buffer(Client& client, const std::string& id, std::istream& in, std::uint64_t offset,
                            std::size_t chunk) {
    TransferResult result;
    std::uint64_t nbytes = 0;
    if (auto mapped = map_buffer(client, id, true, nbytes)) {
        check_offset(offset, nbytes);
        auto* base = reinterpret_cast<char*>(mapped->data()) + offset;
        in.read(base, static_cast<std::streamsize>(nbytes - offset));
        result.bytes = static_cast<std::uint64_t>(in.gcount());
        result.requests = 1;
        if (in.peek() != std::char_traits<char>::eof()) {
            std::uint64_t more = 0;
            for (std::string rest; !(rest = next_chunk(in, chunk)).empty();) {
                more += rest.size();
            }
            past_end("writing", result.bytes + more, offset, nbytes);
        }
        in.clear(in.rdstate() & ~(std::ios::failbit | std::ios::eofbit)); // a short stream is not a read error
        return result;
    }
    for (;;) {
        const std::string data = next_chunk(in, chunk);
        if (data.empty() && result.requests > 0) {
            break;
        }
        const std::uint64_t at = offset + result.bytes;
        const json reply =
            client.call({{"op", "buffer.write"}, {"buffer", id}, {"offset", at}, {"data", base64_encode(data)}});
        const json written = reply.value("written", json());
        if (!written.is_number_unsigned() || written.get<std::uint64_t>() != data.size()) {
            throw protocol_error("buffer.write of " + range_text(at, data.size()) + " replied written " +
                                 written.dump() + ", expected " + std::to_string(data.size()));
        }
        result.bytes += data.size();
        ++result.requests;
        if (data.size() < chunk) {
            break;
        }
    }
    return result;
}

TransferResult read_buffer(Client& client, const std::string& id, std::ostream& out, std::uint64_t offset,
                           std::uint64_t bytes, std::size_t chunk) {
    TransferResult result;
    std::uint64_t nbytes = 0;
    if (auto mapped = map_buffer(client, id, false, nbytes)) {
        check_offset(offset, nbytes);
        if (bytes > nbytes - offset) {
            past_end("reading", bytes, offset, nbytes);
        }
        out.write(reinterpret_cast<const char*>(mapped->data()) + offset, static_cast<std::streamsize>(bytes));
        result.bytes = bytes;
        result.requests = 1;
        return result;
    }
    while (result.bytes < bytes) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, bytes - result.bytes));
        const std::uint64_t at = offset + result.bytes;
        const json reply = client.call({{"op", "buffer.read"}, {"buffer", id}, {"offset", at}, {"bytes", n}});
        const json data = reply.value("data", json());
        if (!data.is_string()) {
            throw protocol_error("buffer.read of " + range_text(at, n) + " replied without a \"data\" string");
        }
        std::string decoded;
        try {
            decoded = base64_decode(data.get_ref<const std::string&>());
        } catch (const Base64Error& e) {
            throw protocol_error("buffer.read of " + range_text(at, n) + ": " + e.what());
        }
        if (decoded.size() != n) {
            throw protocol_error("buffer.read of " + range_text(at, n) + " returned " + std::to_string(decoded.size()) +
                                 " bytes");
        }
        out.write(decoded.data(), static_cast<std::streamsize>(decoded.size()));
        result.bytes += n;
        ++result.requests;
    }
    return result;
}

std::uint64_t buffer_size(Client& client, const std::string& id) {
    const json reply = client.call({{"op", "buffer.show"}, {"buffer", id}});
    const json buffer = reply.value("buffer", json());
    if (!buffer.is_object() || !buffer.contains("nbytes") || !buffer["nbytes"].is_number_unsigned()) {
        throw protocol_error("buffer.show of " + id + " replied without buffer.nbytes");
    }
    return buffer["nbytes"].get<std::uint64_t>();
}

} // namespace canopy::cli
