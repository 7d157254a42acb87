#include "cli/transfer.h"

#include "cli/base64.h"
#include "cli/cli_error.h"

#include <algorithm>
#include <istream>
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

} // namespace

TransferResult write_buffer(Client& client, const std::string& id, std::istream& in, std::uint64_t offset,
                            std::size_t chunk) {
    TransferResult result;
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
