#include "config/bounded_json.h"

#include "config/detail/field.h"

#include <utility>
#include <vector>

namespace canopy::config {
namespace {

using nlohmann::json;

// A container being filled, and for an object the key of the member read last. `key` points at the
// map's own copy of the key, which stays put while the object lives.
struct OpenContainer {
    json* value = nullptr;
    const std::string* key = nullptr;
};

// Builds the tree from SAX events, stopping at the first container past the depth limit or the first
// repeated key. The containers on `open_` are each the last child of the one before, and a container
// takes no new child while a child of it is open, so the pointers stay valid.
class TreeBuilder : public nlohmann::json_sax<json> {
public:
    explicit TreeBuilder(std::size_t max_depth) : max_depth_(max_depth) {}

    json root;
    std::optional<JsonRefusal> refusal;

    bool null() override { return place(nullptr) != nullptr; }
    bool boolean(bool value) override { return place(value) != nullptr; }
    bool number_integer(number_integer_t value) override { return place(value) != nullptr; }
    bool number_unsigned(number_unsigned_t value) override { return place(value) != nullptr; }
    bool number_float(number_float_t value, const string_t&) override { return place(value) != nullptr; }
    // The lexer clears its token buffer before the next token, so the text may be moved out.
    bool string(string_t& value) override { return place(std::move(value)) != nullptr; }
    bool binary(binary_t& value) override { return place(std::move(value)) != nullptr; }
    bool start_object(std::size_t) override { return open(json::object()); }
    bool start_array(std::size_t) override { return open(json::array()); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }

    bool key(string_t& key) override {
        OpenContainer& object = open_.back();
        auto [member, inserted] = object.value->get_ref<json::object_t&>().try_emplace(key);
        if (!inserted) {
            JsonRefusal& repeated = refuse(JsonRefusalKind::DUPLICATE_KEY);
            repeated.pointer = pointer();
            repeated.key = key;
            return false;
        }
        object.key = &member->first;
        member_ = &member->second;
        return true;
    }

    bool parse_error(std::size_t read, const std::string&, const nlohmann::json::exception& ex) override {
        JsonRefusal& syntax = refuse(JsonRefusalKind::SYNTAX);
        syntax.read = read;
        syntax.message = ex.what();
        return false;
    }

private:
    JsonRefusal& refuse(JsonRefusalKind kind) {
        refusal.emplace();
        refusal->kind = kind;
        return *refusal;
    }

    // Puts a value into the innermost container, or makes it the document; returns where it lives.
    template <typename Value>
    json* place(Value&& value) {
        if (open_.empty()) {
            root = json(std::forward<Value>(value));
            return &root;
        }
        json& parent = *open_.back().value;
        if (parent.is_array()) {
            auto& elements = parent.get_ref<json::array_t&>();
            elements.emplace_back(std::forward<Value>(value));
            return &elements.back();
        }
        *member_ = json(std::forward<Value>(value));
        return member_;
    }

    bool open(json container) {
        if (open_.size() >= max_depth_) {
            std::string at = pointer();
            if (!open_.empty()) {
                at += "/" + next_token(open_.back());
            }
            JsonRefusal& too_deep = refuse(JsonRefusalKind::TOO_DEEP);
            too_deep.pointer = std::move(at);
            too_deep.max_depth = max_depth_;
            return false;
        }
        open_.push_back({place(std::move(container)), nullptr});
        return true;
    }

    bool close() {
        open_.pop_back();
        return true;
    }

    // The reference token the next child of `parent` takes.
    static std::string next_token(const OpenContainer& parent) {
        if (parent.value->is_array()) {
            return std::to_string(parent.value->size());
        }
        return detail::escape_pointer_token(*parent.key);
    }

    // The pointer of the innermost open container.
    std::string pointer() const {
        std::string text;
        for (std::size_t i = 1; i < open_.size(); ++i) {
            const OpenContainer& parent = open_[i - 1];
            text += '/';
            text += parent.value->is_array() ? std::to_string(parent.value->size() - 1)
                                             : detail::escape_pointer_token(*parent.key);
        }
        return text;
    }

    std::size_t max_depth_;
    std::vector<OpenContainer> open_;
    json* member_ = nullptr; // the member the last key() made, which the next value fills
};

} // namespace

BoundedJson parse_bounded_json(std::string_view text, std::size_t max_depth) {
    TreeBuilder builder(max_depth);
    BoundedJson out;
    if (json::sax_parse(text, &builder)) {
        out.value = std::move(builder.root);
    } else {
        out.refusal = builder.refusal ? std::move(builder.refusal) : JsonRefusal{};
    }
    return out;
}

} // namespace canopy::config
