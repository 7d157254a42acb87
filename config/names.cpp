// The JSON spellings of the config enums.

#include "config/config.h"

namespace canopy::config {

std::string_view to_string(ChipBackend backend) noexcept {
    switch (backend) {
    case ChipBackend::CUDA:
        return "cuda";
    case ChipBackend::SIM:
        return "sim";
    }
    return "unknown";
}

std::string_view to_string(PreloadBackend backend) noexcept {
    switch (backend) {
    case PreloadBackend::FORK_COW:
        return "fork_cow";
    case PreloadBackend::FORK_SHM:
        return "fork_shm";
    }
    return "unknown";
}

std::string_view to_string(LogLevel level) noexcept {
    switch (level) {
    case LogLevel::TRACE:
        return "trace";
    case LogLevel::DEBUG:
        return "debug";
    case LogLevel::INFO:
        return "info";
    case LogLevel::WARN:
        return "warn";
    case LogLevel::ERROR:
        return "error";
    case LogLevel::CRITICAL:
        return "critical";
    case LogLevel::OFF:
        return "off";
    }
    return "unknown";
}

std::string_view to_string(LogFormat format) noexcept {
    switch (format) {
    case LogFormat::AUTO:
        return "auto";
    case LogFormat::TEXT:
        return "text";
    case LogFormat::JOURNAL:
        return "journal";
    }
    return "unknown";
}

} // namespace canopy::config
