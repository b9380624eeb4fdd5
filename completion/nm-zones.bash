# bash completion for nm-zones(8): commands, their options, zones, services, interfaces and
# NetworkManager connections. Kept in step with `nm-zones --help` by tests/test_docs.py.

# Where the shipped zones and services are when a distribution package installed them; a pip
# installation keeps them in its package folder, and then `nm-zones zones` lists them.
_nm_zones_shipped_dirs="/usr/share/nm-zones"

_nm_zones_commands="zones show services check plan apply remove status allow revoke log reload
gc assign default-zone networks enable disable panic serve install"

# NAME for each NAME.yaml in the shipped and the admin's SUBDIR (zones.d, services.d).
_nm_zones_yaml_names() {
    local subdir=$1 dir file found=""
    local config=${NM_ZONES_CONFIG_DIR:-/etc/nm-zones}
    for dir in $_nm_zones_shipped_dirs; do
        [[ -d $dir/$subdir ]] && found=yes
    done
    if [[ -z $found ]]; then
        return 1
    fi
    for dir in $_nm_zones_shipped_dirs "$config"; do
        for file in "$dir/$subdir"/*.yaml; do
            [[ -e $file ]] || continue
            file=${file##*/}
            [[ $file == .* ]] || printf '%s\n' "${file%.yaml}"
        done
    done
}

_nm_zones_zones() {
    # the folders are cheap to read; without them (a pip install), ask the command itself
    _nm_zones_yaml_names zones.d ||
        "$1" zones 2>/dev/null | while read -r first second _; do
            if [[ $first == "*" ]]; then printf '%s\n' "$second"; else printf '%s\n' "$first"; fi
        done
}

_nm_zones_services() {
    _nm_zones_yaml_names services.d ||
        "$1" services 2>/dev/null | while read -r name _; do printf '%s\n' "$name"; done
}

_nm_zones_interfaces() {
    local link
    for link in /sys/class/net/*; do
        [[ -e $link ]] && printf '%s\n' "${link##*/}"
    done
}

_nm_zones_networks() {
    "$1" networks 2>/dev/null | while read -r id _; do
        [[ $id == [0-9a-z]* && $id != no ]] && printf '%s\n' "$id"
    done
}

_nm_zones_connections() {
    type -P nmcli >/dev/null && nmcli -g NAME connection show 2>/dev/null
}

# COMPREPLY from the lines on stdin that start with the word being completed; names with
# spaces (connections) are quoted for the command line. Give it its lines with < <(...):
# behind a pipe it would run in a subshell, and fill that subshell's COMPREPLY.
_nm_zones_reply() {
    local cur=$1 line
    COMPREPLY=()
    while IFS= read -r line; do
        [[ -n $line && $line == "$cur"* ]] || continue
        if [[ $line == *[[:space:]\'\"\\\$\`]* ]]; then
            COMPREPLY+=("$(printf '%q' "$line")")
        else
            COMPREPLY+=("$line")
        fi
    done < <(sort -u)
}

# units and scopes running now, by their cgroup's name (allow --app)
_nm_zones_apps() {
    find /sys/fs/cgroup -maxdepth 6 -type d \( -name '*.service' -o -name '*.scope' \) \
        -printf '%f\n' 2>/dev/null | sort -u
}

_nm_zones() {
    COMPREPLY=()
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local program=${COMP_WORDS[0]} command="" i word
    local -a positionals=()

    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ -z $command ]]; then
            [[ $word == -* ]] || command=$word
        elif [[ $word != -* && ${COMP_WORDS[i-1]} != --@(root|zone|interface|for) ]]; then
            positionals+=("$word")
        fi
    done

    if [[ -z $command ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$_nm_zones_commands" -- "$cur"))
        fi
        return
    fi

    case $prev in
        --root) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --zone) _nm_zones_reply "$cur" < <(_nm_zones_zones "$program"); return ;;
        --interface) _nm_zones_reply "$cur" < <(_nm_zones_interfaces); return ;;
        --for) COMPREPLY=($(compgen -W "30s 10m 1h 2h 1d" -- "$cur")); return ;;
        --app) _nm_zones_reply "$cur" < <(_nm_zones_apps); return ;;
        --network) _nm_zones_reply "$cur" < <(_nm_zones_networks "$program"); return ;;
    esac

    local options="--help"
    case $command in
        zones | show | services | status | networks) options+=" --json" ;;
        assign) options+=" --profile" ;;
        default-zone) options+=" --wired --wireless" ;;
        install) options+=" --root --uninstall" ;;
        allow) options+=" --app --zone --interface --network --for --permanent" ;;
        revoke) options+=" --app --zone --interface --network --permanent" ;;
        log) options+=" --follow" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
        return
    fi

    local n=${#positionals[@]}
    case $command in
        show) ((n == 0)) && _nm_zones_reply "$cur" < <(_nm_zones_zones "$program") ;;
        plan | apply)
            if ((n == 0)); then
                _nm_zones_reply "$cur" < <(_nm_zones_interfaces)
            elif ((n == 1)); then
                _nm_zones_reply "$cur" < <(_nm_zones_zones "$program")
            fi
            ;;
        remove) ((n == 0)) && _nm_zones_reply "$cur" < <(_nm_zones_interfaces) ;;
        assign)
            if ((n == 0)); then
                _nm_zones_reply "$cur" < <(_nm_zones_connections)
            elif ((n == 1)); then
                _nm_zones_reply "$cur" < <(_nm_zones_zones "$program")
            fi
            ;;
        default-zone) ((n == 0)) && _nm_zones_reply "$cur" < <(_nm_zones_zones "$program") ;;
        networks)
            if ((n == 0)); then
                COMPREPLY=($(compgen -W "forget rename zone" -- "$cur"))
            elif ((n == 1)); then
                _nm_zones_reply "$cur" < <(_nm_zones_networks "$program")
            elif ((n == 2)) && [[ ${positionals[0]} == zone ]]; then
                _nm_zones_reply "$cur" < <(_nm_zones_zones "$program")
            fi
            ;;
        status | log) ((n == 0)) && _nm_zones_reply "$cur" < <(_nm_zones_interfaces) ;;
        allow | revoke) ((n == 0)) && _nm_zones_reply "$cur" < <(_nm_zones_services "$program") ;;
        panic) ((n == 0)) && COMPREPLY=($(compgen -W "on off" -- "$cur")) ;;
    esac
    return 0
}

complete -F _nm_zones nm-zones
