#include "cli/render.h"

#include "cli/table.h"
#include "cli/units.h"

namespace canopy::cli {

namespace {

using nlohmann::json;

const json& member(const json& object, const char* key) {
    static const json NONE;
    if (!object.is_object()) {
        return NONE;
    }
    const auto it = object.find(key);
    return it == object.end() ? NONE : *it;
}

std::string string_or(const json& object, const char* key, const std::string& fallback) {
    const json& v = member(object, key);
    return v.is_string() ? v.get<std::string>() : fallback;
}

std::uint64_t uint_or(const json& object, const char* key, std::uint64_t fallback) {
    const json& v = member(object, key);
    return v.is_number_unsigned() ? v.get<std::uint64_t>() : fallback;
}

std::string join(const json& list, const char* sep) {
    std::string out;
    if (!list.is_array()) {
        return out;
    }
    for (const auto& item : list) {
        out += (out.empty() ? "" : sep) + (item.is_string() ? item.get<std::string>() : item.dump());
    }
    return out;
}

std::string bytes_text(const json& buffer) {
    const json& n = member(buffer, "nbytes");
    if (!n.is_number_unsigned()) {
        return "-";
    }
    const auto v = n.get<std::uint64_t>();
    return format_bytes(v) + " (" + std::to_string(v) + ")";
}

std::string where_text(const json& buffer) {
    const std::string world = join(member(buffer, "world"), ",");
    if (!world.empty()) {
        return world;
    }
    return string_or(buffer, "creator", "-").empty() ? "-" : string_or(buffer, "creator", "-");
}

std::string elapsed_text(const json& task) {
    const std::uint64_t start = uint_or(task, "start_ns", 0);
    const std::uint64_t end = uint_or(task, "end_ns", 0);
    return start != 0 && end >= start ? format_elapsed_ns(end - start) : "-";
}

} // namespace

std::string field_text(const json& object, const char* key) {
    const json& v = member(object, key);
    if (v.is_string()) {
        return printable(v.get<std::string>());
    }
    if (v.is_number()) {
        return v.dump();
    }
    return "-";
}

std::string task_error_text(const json& task) {
    const json& error = member(task, "error");
    if (!error.is_object()) {
        return "";
    }
    return field_text(error, "code") + ": " + string_or(error, "message", "");
}

std::string render_buffer_list(const json& buffers) {
    Table table({{"ID"},
                 {"NAME", Table::Align::LEFT, true},
                 {"BACKEND"},
                 {"BYTES", Table::Align::RIGHT},
                 {"ACCESS"},
                 {"WHERE"}});
    if (buffers.is_array()) {
        for (const auto& b : buffers) {
            table.add_row({field_text(b, "id"), string_or(b, "name", ""), field_text(b, "backend"), bytes_text(b),
                           field_text(b, "access"), where_text(b)});
        }
    }
    return table.render();
}

std::string render_buffer(const json& buffer) {
    Table table({{"FIELD"}, {"VALUE"}});
    table.add_row({"id", field_text(buffer, "id")});
    if (!string_or(buffer, "name", "").empty()) {
        table.add_row({"name", string_or(buffer, "name", "")});
    }
    table.add_row({"backend", field_text(buffer, "backend")});
    table.add_row({"bytes", bytes_text(buffer)});
    table.add_row({"access", field_text(buffer, "access")});
    table.add_row({"device", field_text(buffer, "device")});
    if (!join(member(buffer, "world"), ",").empty()) {
        table.add_row({"world", join(member(buffer, "world"), ",")});
    }
    table.add_row({"creator", field_text(buffer, "creator")});
    if (buffer.is_object() && buffer.contains("owner_uid") && !buffer["owner_uid"].is_null()) {
        table.add_row({"owner", "uid " + field_text(buffer, "owner_uid")});
    }
    const std::string text = table.render();
    return text.substr(text.find('\n') + 1); // without the header line
}

std::string render_tasks(const json& tasks) {
    Table table({{"ID", Table::Align::RIGHT},
                 {"NAME"},
                 {"KERNEL"},
                 {"ON"},
                 {"STATE"},
                 {"TIME", Table::Align::RIGHT},
                 {"ERROR", Table::Align::LEFT, true}});
    if (tasks.is_array()) {
        for (const auto& t : tasks) {
            table.add_row({field_text(t, "id"), field_text(t, "name"), field_text(t, "kernel"), field_text(t, "on"),
                           field_text(t, "state"), elapsed_text(t), task_error_text(t)});
        }
    }
    return table.render();
}

} // namespace canopy::cli
