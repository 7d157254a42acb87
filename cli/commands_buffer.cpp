// The buffer commands: create, list, show, release, write, read.

#include "cli/commands.h"
#include "cli/render.h"
#include "cli/requests.h"
#include "cli/table.h"
#include "cli/transfer.h"
#include "cli/units.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <system_error>
#include <unistd.h>

namespace canopy::cli {

namespace {

using nlohmann::json;

void print_buffer(Invocation& inv, const json& buffer) {
    if (inv.json()) {
        inv.print_json(buffer);
    } else {
        inv.out() << render_buffer(buffer);
        inv.print_ids(json::array({buffer}));
    }
}

int create(Invocation& inv, const BufferCreateArgs& args) {
    const client::BufferSpec spec = buffer_create_spec(args);
    print_buffer(inv, inv.client().create_buffer(spec).json);
    return 0;
}

int list(Invocation& inv) {
    json buffers = json::array();
    for (const auto& b : inv.client().list_buffers()) {
        buffers.push_back(b.json);
    }
    if (inv.json()) {
        inv.print_json({{"buffers", buffers}});
    } else {
        inv.out() << render_buffer_list(buffers);
        inv.print_ids(buffers);
    }
    return 0;
}

int show(Invocation& inv, const std::string& id) {
    print_buffer(inv, inv.client().show_buffer(id).json);
    return 0;
}

int release(Invocation& inv, const std::string& id) {
    const std::optional<std::string> warning = inv.client().release_buffer(id);
    json reply = json::object();
    if (warning) {
        inv.err() << "canopy: warning: " << printable(*warning) << "\n";
        reply["warning"] = *warning;
    }
    if (inv.json()) {
        inv.print_json(reply);
    } else {
        inv.out() << "released " << id << "\n";
    }
    return 0;
}

struct TransferArgs {
    std::string id;
    std::string file;
    std::string offset; // empty: 0
    std::string bytes;  // empty: to the end of the buffer
};

std::uint64_t offset_of(const TransferArgs& args) {
    return args.offset.empty() ? 0 : parse_byte_size(args.offset, "--offset");
}

int write(Invocation& inv, const TransferArgs& args) {
    const std::uint64_t offset = offset_of(args);
    std::ifstream in(args.file, std::ios::binary);
    if (!in) {
        throw usage_error("--from \"" + args.file + "\": cannot open: " + std::generic_category().message(errno));
    }
    const TransferResult done = write_buffer(inv.client(), args.id, in, offset);
    if (in.bad()) {
        throw usage_error("--from \"" + args.file + "\": read error after " + std::to_string(done.bytes) + " bytes");
    }
    if (inv.json()) {
        inv.print_json({{"buffer", args.id}, {"offset", offset}, {"written", done.bytes}, {"requests", done.requests}});
    } else {
        inv.out() << "wrote " << done.bytes << " bytes to " << args.id << " at offset " << offset << "\n";
    }
    return 0;
}

// The byte count to read: --bytes when given, else from --offset to the buffer's end.
std::uint64_t read_size(Invocation& inv, const TransferArgs& args, std::optional<std::uint64_t> bytes,
                        std::uint64_t offset) {
    if (bytes) {
        return *bytes;
    }
    const std::uint64_t nbytes = inv.client().show_buffer(args.id).nbytes;
    if (offset > nbytes) {
        throw usage_error("--offset \"" + args.offset + "\": past the end of " + args.id + " (" +
                          std::to_string(nbytes) + " bytes)");
    }
    return nbytes - offset;
}

int read(Invocation& inv, const TransferArgs& args) {
    const std::uint64_t offset = offset_of(args);
    const auto given = args.bytes.empty() ? std::nullopt : std::optional(parse_byte_size(args.bytes, "--bytes"));
    const std::uint64_t bytes = read_size(inv, args, given, offset);
    // A regular file (or a new one) is written beside its final name and renamed over it once the read
    // succeeded: a failed read leaves a file that was there untouched, and no partial copy. Anything else
    // (/dev/stdout, a pipe) is written in place.
    std::error_code ec;
    const auto status = std::filesystem::status(args.file, ec);
    const bool in_place = !ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status);
    const std::string target = in_place ? args.file : args.file + ".canopy-partial-" + std::to_string(::getpid());
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    if (!out) {
        throw usage_error("--to \"" + args.file + "\": cannot open: " + std::generic_category().message(errno));
    }
    TransferResult done;
    try {
        done = read_buffer(inv.client(), args.id, out, offset, bytes);
        out.close();
        if (!out) {
            throw usage_error("--to \"" + args.file + "\": write error");
        }
        if (!in_place && std::rename(target.c_str(), args.file.c_str()) != 0) {
            throw usage_error("--to \"" + args.file + "\": cannot replace: " + std::generic_category().message(errno));
        }
    } catch (...) {
        out.close();
        if (!in_place) {
            std::remove(target.c_str());
        }
        throw;
    }
    if (inv.json()) {
        inv.print_json({{"buffer", args.id}, {"offset", offset}, {"bytes", done.bytes}, {"requests", done.requests}});
    } else {
        inv.out() << "read " << done.bytes << " bytes of " << args.id << " at offset " << offset << " into "
                  << args.file << "\n";
    }
    return 0;
}

CLI::App* add_leaf(CLI::App& parent, const char* name, const char* help, Invocation& inv) {
    CLI::App* command = parent.add_subcommand(name, help);
    add_common_options(*command, inv);
    return command;
}

void add_create(CLI::App& buffer, Invocation& inv, Action& action) {
    CLI::App* cmd = add_leaf(buffer, "create", "create a buffer", inv);
    auto args = std::make_shared<BufferCreateArgs>();
    cmd->add_option("--bytes", args->bytes, "size: an integer, optionally with K, M, G or T (KiB...)")
        ->type_name("N")
        ->required();
    cmd->add_option("--backend", args->backend, "shm (default), vmm or symmetric")
        ->type_name("BACKEND")
        ->check(CLI::IsMember({"shm", "vmm", "symmetric"}));
    cmd->add_option("--on", args->on, "worker that creates it: the supervisor for shm, the chip for vmm")
        ->type_name("WORKER");
    cmd->add_option("--world", args->world, "chips of a symmetric buffer in rank order: chip0,chip1")
        ->type_name("CHIPS");
    cmd->add_option("--access", args->access, "r, w or rw (default)")
        ->type_name("ACCESS")
        ->check(CLI::IsMember({"r", "w", "rw"}));
    cmd->callback([&inv, &action, args] { action = [&inv, args] { return create(inv, *args); }; });
}

void add_transfer(CLI::App& buffer, Invocation& inv, Action& action) {
    CLI::App* wr = add_leaf(buffer, "write", "copy a file's bytes into a buffer", inv);
    auto wargs = std::make_shared<TransferArgs>();
    wr->add_option("ID", wargs->id, "buffer ID or preloaded name")->required();
    wr->add_option("--from", wargs->file, "file to copy")->type_name("FILE")->required();
    wr->add_option("--offset", wargs->offset, "byte offset in the buffer (default 0)")->type_name("N");
    wr->callback([&inv, &action, wargs] { action = [&inv, wargs] { return write(inv, *wargs); }; });

    CLI::App* rd = add_leaf(buffer, "read", "copy a buffer's bytes into a file", inv);
    auto rargs = std::make_shared<TransferArgs>();
    rd->add_option("ID", rargs->id, "buffer ID or preloaded name")->required();
    rd->add_option("--to", rargs->file, "file to write")->type_name("FILE")->required();
    rd->add_option("--offset", rargs->offset, "byte offset in the buffer (default 0)")->type_name("N");
    rd->add_option("--bytes", rargs->bytes, "byte count (default: to the end of the buffer)")->type_name("N");
    rd->callback([&inv, &action, rargs] { action = [&inv, rargs] { return read(inv, *rargs); }; });
}

} // namespace

void add_buffer_commands(CLI::App& app, Invocation& inv, Action& action) {
    CLI::App* buffer = app.add_subcommand("buffer", "create, inspect, fill and release buffers");
    buffer->require_subcommand(1);
    add_create(*buffer, inv, action);

    add_leaf(*buffer, "list", "list the buffers", inv)->callback([&inv, &action] {
        action = [&inv] { return list(inv); };
    });

    auto id = std::make_shared<std::string>();
    CLI::App* show_cmd = add_leaf(*buffer, "show", "show one buffer", inv);
    show_cmd->add_option("ID", *id, "buffer ID or preloaded name")->required();
    show_cmd->callback([&inv, &action, id] { action = [&inv, id] { return show(inv, *id); }; });

    CLI::App* release_cmd = add_leaf(*buffer, "release", "release a buffer", inv);
    release_cmd->add_option("ID", *id, "buffer ID or preloaded name")->required();
    release_cmd->callback([&inv, &action, id] { action = [&inv, id] { return release(inv, *id); }; });

    add_transfer(*buffer, inv, action);
}

} // namespace canopy::cli
