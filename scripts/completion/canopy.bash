# bash completion for canopy(1): commands, their subcommands and options, and worker paths from the daemon.
_canopy() {
    local cur prev words cword
    _init_completion || return
    local globals="--json -q --quiet --socket --help --version"
    local commands="status worker metrics shutdown module buffer submit run wait cancel tasks"
    local cmd="" sub="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        --socket) ((i++)) ;;
        -*) ;;
        *)
            if [[ -z $cmd ]]; then
                cmd=${words[i]}
            elif [[ -z $sub ]]; then
                sub=${words[i]}
            fi
            ;;
        esac
    done
    case $prev in
    --socket | --from | --to)
        _filedir
        return
        ;;
    --on)
        local paths
        paths=$(canopy status --json 2>/dev/null | python3 -c 'import json,sys
for w in json.load(sys.stdin)["workers"]:
    print(w["path"].lstrip("/"))' 2>/dev/null)
        COMPREPLY=($(compgen -W "$paths" -- "$cur"))
        return
        ;;
    --backend)
        COMPREPLY=($(compgen -W "shm vmm symmetric" -- "$cur"))
        return
        ;;
    --access)
        COMPREPLY=($(compgen -W "r w rw" -- "$cur"))
        return
        ;;
    --format)
        COMPREPLY=($(compgen -W "ptx cubin fatbin" -- "$cur"))
        return
        ;;
    esac
    local words_here="$globals"
    case $cmd in
    "") words_here="$commands $globals" ;;
    buffer) [[ -z $sub ]] && words_here="create list show release write read" ||
        words_here="--bytes --backend --on --world --access --from --to --offset $globals" ;;
    module) [[ -z $sub ]] && words_here="load list" || words_here="--format $globals" ;;
    worker) [[ -z $sub ]] && words_here="restart" ;;
    submit) words_here="--on --in --out --inout --scalar --param --grid --block --shared --tf32 --wait $globals" ;;
    run)
        words_here="--wait $globals"
        [[ $cur != -* ]] && { _filedir json; return; }
        ;;
    wait) words_here="--timeout $globals" ;;
    esac
    COMPREPLY=($(compgen -W "$words_here" -- "$cur"))
}
complete -F _canopy canopy
