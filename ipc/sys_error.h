#pragma once
// SysError: a failed system call, carrying errno and the call's name. sys_check / sys_retry are the one
// place errno becomes an exception; sys_retry also retries EINTR so call sites never do.
//
// Thread safety: free functions, reentrant.

#include <cerrno>
#include <string>
#include <system_error>

namespace canopy::ipc {

class SysError : public std::system_error {
public:
    SysError(int err, const std::string& call) : std::system_error(err, std::generic_category(), call) {}
    int err() const noexcept { return code().value(); }
};

// Throws SysError(errno, call) when result is -1 (or negative); returns result otherwise.
template <class T>
T sys_check(T result, const char* call) {
    if (result < 0) {
        throw SysError(errno, call);
    }
    return result;
}

// Calls fn() until it does not fail with EINTR, then sys_check's the result.
template <class Fn>
auto sys_retry(const char* call, Fn&& fn) {
    for (;;) {
        auto result = fn();
        if (result < 0 && errno == EINTR) {
            continue;
        }
        return sys_check(result, call);
    }
}

} // namespace canopy::ipc
