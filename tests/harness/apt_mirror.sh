# apt_mirror.sh — sourced by tests/image/base.sh and tests/trixie/root.sh:
# the Debian mirror this host's apt already uses, so a Debian root made
# with debootstrap (any suite) comes from the same place as the host's own
# packages and no host name is written into the repository.
#
#   rl_apt_mirrors   sets rl_mirror (the archive, e.g. .../debian) and
#                    rl_security_mirror (.../debian-security, empty when the
#                    host has none) from the entries of the host's own
#                    release (VERSION_CODENAME in /etc/os-release) in
#                    /etc/apt/sources.list.d/*.sources and
#                    /etc/apt/sources.list[.d/*.list]; RL_DEBIAN_MIRROR and
#                    RL_DEBIAN_SECURITY_MIRROR override them. Returns 1 with
#                    a message on stderr when no archive entry is found.
#
# shellcheck shell=bash disable=SC2034 # the variables are for the caller

# Prints the first enabled `deb` URI whose suites include $1, from deb822
# .sources files, then from one-line .list files.
rl_apt_uri_for_suite() {
    local suite=$1 f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v want="$suite" '
            function flush() {
                if (uris != "" && types ~ /(^| )deb( |$)/ &&
                    (" " suites " ") ~ (" " want " ") && enabled != "no") {
                    split(uris, u, " "); print u[1]; found = 1; exit
                }
                types = uris = suites = enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "enabled") enabled = tolower(val)
            }
            END { if (!found) flush() }
        ' "$f" | head -n 1
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI SUITE COMPONENTS...
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" |
            awk -v want="$suite" '$1 == "deb" && $3 == want { print $2; exit }'
    done
}

rl_apt_mirrors() {
    local codename
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    rl_mirror=${RL_DEBIAN_MIRROR:-}
    rl_security_mirror=${RL_DEBIAN_SECURITY_MIRROR:-}
    if [ -z "$rl_mirror" ] && [ -n "$codename" ]; then
        rl_mirror=$(rl_apt_uri_for_suite "$codename" | head -n 1)
    fi
    if [ -z "$rl_security_mirror" ] && [ -n "$codename" ]; then
        rl_security_mirror=$(rl_apt_uri_for_suite "$codename-security" | head -n 1)
    fi
    rl_mirror=${rl_mirror%/}
    rl_security_mirror=${rl_security_mirror%/}
    if [ -z "$rl_mirror" ]; then
        echo "no ${codename:-Debian} entry in this host's apt sources; set RL_DEBIAN_MIRROR" >&2
        return 1
    fi
}
