#include "config/detail/read_file.h"

#include "config/config_error.h"

#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace canopy::config::detail {
namespace {

// Closes the descriptor it holds.
class FileDescriptor {
public:
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    int get() const noexcept { return fd_; }

private:
    int fd_;
};

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& problem) {
    throw ConfigError("", "cannot read config file \"" + file.string() + "\": " + problem);
}

[[noreturn]] void fail_errno(const std::filesystem::path& file, const char* call, int error) {
    fail(file, std::string(call) + ": " + std::generic_category().message(error));
}

int open_retrying(const std::filesystem::path& file) {
    int fd = -1;
    do {
        fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

} // namespace

std::string read_config_file(const std::filesystem::path& file) {
    const FileDescriptor fd(open_retrying(file));
    if (fd.get() < 0) {
        fail_errno(file, "open", errno);
    }
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) {
        fail_errno(file, "fstat", errno);
    }
    if (!S_ISREG(info.st_mode)) {
        fail(file, S_ISDIR(info.st_mode) ? std::generic_category().message(EISDIR) : "not a regular file");
    }
    if (static_cast<std::uint64_t>(info.st_size) > MAX_CONFIG_FILE_BYTES) {
        fail(file, "larger than " + std::to_string(MAX_CONFIG_FILE_BYTES) + " bytes");
    }
    std::string text;
    char buffer[65536];
    for (;;) {
        const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            fail_errno(file, "read", errno);
        }
        if (got == 0) {
            return text;
        }
        text.append(buffer, static_cast<std::size_t>(got));
        if (text.size() > MAX_CONFIG_FILE_BYTES) {
            fail(file, "larger than " + std::to_string(MAX_CONFIG_FILE_BYTES) + " bytes");
        }
    }
}

} // namespace canopy::config::detail
