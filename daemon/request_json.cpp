#include "daemon/request_json.h"

#include "config/bounded_json.h"

#include <cstring>

namespace canopy::daemon {
namespace {

std::string refusal_message(const config::JsonRefusal& refusal) {
    switch (refusal.kind) {
    case config::JsonRefusalKind::TOO_DEEP:
        return "request: JSON nests deeper than " + std::to_string(refusal.max_depth) + " levels at " + refusal.pointer;
    case config::JsonRefusalKind::DUPLICATE_KEY: {
        const std::string key =
            nlohmann::json(refusal.key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return "request: duplicate key " + key +
               (refusal.pointer.empty() ? " in the top-level object" : " in object at " + refusal.pointer);
    }
    case config::JsonRefusalKind::SYNTAX:
        break;
    }
    return "the frame body is not a JSON object";
}

// Whether `needle` occurs in `body`. glibc's memmem runs its two-way search over whole words; string_view::find
// stops at every '"' of a large graph's JSON for a needle that starts with one.
bool contains(std::string_view body, std::string_view needle) noexcept {
    return ::memmem(body.data(), body.size(), needle.data(), needle.size()) != nullptr;
}

} // namespace

ParsedRequest parse_request(std::string_view body) {
    // Only a body that spells "run" or "submit" can be such a request (an op spelled with escapes goes the general
    // way, which reads it as well): every other request is parsed once.
    const bool may_run = contains(body, "\"run\"") || contains(body, "\"submit\"");
    if (std::unique_ptr<RawRun> run = may_run ? scan_run_request(body) : nullptr) {
        nlohmann::json head = std::move(run->head);
        return {std::move(head), {}, std::move(run)};
    }
    config::BoundedJson parsed = config::parse_bounded_json(body);
    if (parsed.refusal) {
        return {nullptr, refusal_message(*parsed.refusal), nullptr};
    }
    if (!parsed.value.is_object()) {
        return {nullptr, "the frame body is not a JSON object", nullptr};
    }
    return {std::move(parsed.value), {}, nullptr};
}

} // namespace canopy::daemon
