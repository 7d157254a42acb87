#include "cli/frame.h"

#include "cli/cli_error.h"

namespace canopy::cli {

std::array<char, FRAME_HEADER_BYTES> encode_frame_header(std::uint32_t body_size) noexcept {
    std::array<char, FRAME_HEADER_BYTES> header{};
    for (std::size_t i = 0; i < FRAME_HEADER_BYTES; ++i) {
        header[i] = static_cast<char>((body_size >> (8 * i)) & 0xff);
    }
    return header;
}

std::uint32_t decode_frame_header(const std::array<char, FRAME_HEADER_BYTES>& header) noexcept {
    std::uint32_t n = 0;
    for (std::size_t i = 0; i < FRAME_HEADER_BYTES; ++i) {
        n |= static_cast<std::uint32_t>(static_cast<unsigned char>(header[i])) << (8 * i);
    }
    return n;
}

std::string encode_frame(std::string_view body) {
    if (body.size() > UINT32_MAX) {
        throw protocol_error("request of " + std::to_string(body.size()) + " bytes does not fit a frame");
    }
    const auto header = encode_frame_header(static_cast<std::uint32_t>(body.size()));
    std::string frame(header.data(), header.size());
    frame += body;
    return frame;
}

} // namespace canopy::cli
