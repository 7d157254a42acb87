// libFuzzer target: the metrics listener's reader of an HTTP request head (answer_request_line,
// daemon/metrics_listener.cpp) on arbitrary bytes, as a connection to `metrics.listen` can send them (up to the
// listener's 8 KiB head limit).
//
// Invariants: it never throws, its answer is one of 200, 400, 404 and 405 with that status's reason, and the status
// is the one a second reading of the same bytes gives: the request line is everything before the first CRLF; it
// must hold at least two spaces, and the text after its last space must start with "HTTP/"; the method is what
// comes before the first space and the target what lies between the first and the last; the target up to its
// first '?' or '#' must be "/metrics", and the method "GET".

#include "daemon/metrics_listener.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

int expected_status(std::string_view head) {
    std::string line;
    for (std::size_t i = 0; i < head.size(); ++i) {
        if (head[i] == '\r' && i + 1 < head.size() && head[i + 1] == '\n') {
            break;
        }
        line.push_back(head[i]);
    }
    std::vector<std::size_t> spaces;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == ' ') {
            spaces.push_back(i);
        }
    }
    if (spaces.size() < 2) {
        return 400;
    }
    const std::string version = line.substr(spaces.back() + 1);
    if (version.rfind("HTTP/", 0) != 0) {
        return 400;
    }
    const std::string method = line.substr(0, spaces.front());
    std::string path;
    for (std::size_t i = spaces.front() + 1; i < spaces.back(); ++i) {
        if (line[i] == '?' || line[i] == '#') {
            break;
        }
        path.push_back(line[i]);
    }
    if (path != "/metrics") {
        return 404;
    }
    return method == "GET" ? 200 : 405;
}

std::string_view reason_of(int status) {
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    default:
        return "";
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 8192) {
        return 0; // the listener reads no longer head
    }
    const std::string_view head(reinterpret_cast<const char*>(data), size);
    const canopy::daemon::HttpAnswer answer = canopy::daemon::answer_request_line(head);
    const int expected = expected_status(head);
    if (answer.status != expected || answer.reason != reason_of(answer.status)) {
        std::fprintf(stderr, "fuzz_http_request: answered %d '%.*s', expected %d, for '%.*s'\n", answer.status,
                     static_cast<int>(answer.reason.size()), answer.reason.data(), expected, static_cast<int>(size),
                     head.data());
        std::abort();
    }
    return 0;
}
