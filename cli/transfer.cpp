#include "cli/transfer.h"

#include "cli/cli_error.h"

#include <algorithm>
#include <istream>
#include <optional>
#include <ostream>
#include <vector>

namespace canopy::cli {

namespace {

// The next chunk of `in`, at most `chunk` bytes; shorter only at the end of the stream.
std::vector<std::byte> next_chunk(std::istream& in, std::size_t chunk) {
    std::vector<std::byte> data(chunk);
    in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(chunk));
    data.resize(static_cast<std::size_t>(in.gcount()));
    return data;
}

// Buffer `id` mapped through buffer.fd, or nullopt where the daemon hands out no fd that maps here (a device
// buffer of a cuda chip, a preloaded arena, a daemon without buffer.fd): the caller then moves the bytes as
// attachments, whose requests give any refusal in their own words. The hand-over waits for earlier tasks over the
// buffer, so the mapping sees their results, and tasks submitted later see what is written through it.
std::optional<client::BufferMapping> map_buffer(client::Connection& connection, const std::string& id, bool writable) {
    try {
        return connection.map(id, writable ? client::MapAccess::READWRITE : client::MapAccess::READ);
    } catch (const client::Error& e) {
        if (e.code_name() == "BAD_REQUEST" || e.code_name() == "ACCESS_DENIED") {
            return std::nullopt;
        }
        throw;
    }
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

TransferResult write_buffer(client::Connection& connection, const std::string& id, std::istream& in,
                            std::uint64_t offset, std::size_t chunk) {
    TransferResult result;
    if (auto mapped = map_buffer(connection, id, true)) {
        const std::uint64_t nbytes = mapped->size();
        check_offset(offset, nbytes);
        auto* base = reinterpret_cast<char*>(mapped->bytes().data()) + offset;
        in.read(base, static_cast<std::streamsize>(nbytes - offset));
        result.bytes = static_cast<std::uint64_t>(in.gcount());
        result.requests = 1;
        if (in.peek() != std::char_traits<char>::eof()) {
            std::uint64_t more = 0;
            for (std::vector<std::byte> rest; !(rest = next_chunk(in, chunk)).empty();) {
                more += rest.size();
            }
            past_end("writing", result.bytes + more, offset, nbytes);
        }
        in.clear(in.rdstate() & ~(std::ios::failbit | std::ios::eofbit)); // a short stream is not a read error
        return result;
    }
    for (;;) {
        const std::vector<std::byte> data = next_chunk(in, chunk);
        if (data.empty() && result.requests > 0) {
            break;
        }
        connection.write(id, offset + result.bytes, data);
        result.bytes += data.size();
        ++result.requests;
        if (data.size() < chunk) {
            break;
        }
    }
    in.clear(in.rdstate() & ~(std::ios::failbit | std::ios::eofbit));
    return result;
}

TransferResult read_buffer(client::Connection& connection, const std::string& id, std::ostream& out,
                           std::uint64_t offset, std::uint64_t bytes, std::size_t chunk) {
    TransferResult result;
    if (auto mapped = map_buffer(connection, id, false)) {
        const std::uint64_t nbytes = mapped->size();
        check_offset(offset, nbytes);
        if (bytes > nbytes - offset) {
            past_end("reading", bytes, offset, nbytes);
        }
        out.write(reinterpret_cast<const char*>(mapped->cbytes().data()) + offset, static_cast<std::streamsize>(bytes));
        result.bytes = bytes;
        result.requests = 1;
        return result;
    }
    std::vector<std::byte> data(static_cast<std::size_t>(std::min<std::uint64_t>(chunk, bytes)));
    while (result.bytes < bytes) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, bytes - result.bytes));
        const std::uint64_t at = offset + result.bytes;
        const client::ReadResult got = connection.read(id, at, std::span(data).first(n));
        ++result.requests;
        if (got.bytes < n) {
            past_end("reading", bytes, offset, at + got.bytes + got.rest);
        }
        out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(n));
        result.bytes += n;
    }
    return result;
}

} // namespace canopy::cli
