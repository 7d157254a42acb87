#include "protocol/module_image.h"

#include <cstring>
#include <string_view>

namespace canopy {
namespace {

constexpr unsigned char ELF_MAGIC[4] = {0x7f, 'E', 'L', 'F'};
constexpr unsigned char FATBIN_MAGIC[4] = {0x50, 0xed, 0x55, 0xba}; // 0xBA55ED50, little-endian

bool starts_with(std::span<const std::byte> image, const unsigned char (&magic)[4]) noexcept {
    return image.size() >= 4 && std::memcmp(image.data(), magic, 4) == 0;
}

// The offset of the first character that is neither whitespace nor inside a // or /* */ comment.
std::size_t skip_blank(std::string_view text) noexcept {
    std::size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            ++i;
        } else if (text.compare(i, 2, "//") == 0) {
            const auto end = text.find('\n', i);
            i = end == std::string_view::npos ? text.size() : end + 1;
        } else if (text.compare(i, 2, "/*") == 0) {
            const auto end = text.find("*/", i + 2);
            i = end == std::string_view::npos ? text.size() : end + 2;
        } else {
            break;
        }
    }
    return i;
}

bool is_ptx(std::string_view text) noexcept {
    while (!text.empty() && text.back() == '\0') {
        text.remove_suffix(1);
    }
    if (text.find('\0') != std::string_view::npos) {
        return false;
    }
    const std::size_t first = skip_blank(text);
    return first < text.size() && text[first] == '.' && text.find(".version") != std::string_view::npos &&
           text.find(".target") != std::string_view::npos;
}

} // namespace

const char* to_string(ModuleFormat format) noexcept {
    switch (format) {
    case ModuleFormat::PTX:
        return "ptx";
    case ModuleFormat::CUBIN:
        return "cubin";
    case ModuleFormat::FATBIN:
        return "fatbin";
    }
    return "?";
}

std::optional<ModuleFormat> detect_module_format(std::span<const std::byte> image) noexcept {
    if (starts_with(image, ELF_MAGIC)) {
        return ModuleFormat::CUBIN;
    }
    if (starts_with(image, FATBIN_MAGIC)) {
        return ModuleFormat::FATBIN;
    }
    if (is_ptx(std::string_view(reinterpret_cast<const char*>(image.data()), image.size()))) {
        return ModuleFormat::PTX;
    }
    return std::nullopt;
}

} // namespace canopy
