# Sourced (not run) by scripts/prometheus3.sh and scripts/victoriametrics.sh: what building a
# Go program's binaries from the Go module proxy into the cache outside the clone has in common.
# The sourcing script sets `name` (for messages), `slug` (the cache entry: $cache/$slug holds
# the binaries, $slug.log the last build's log, $slug.lock the lock) and `tools` (the binaries);
# `gobuild_prepare` then prints the cached directory and exits when every tool is there, or
# leaves the script holding the lock with a Go toolchain in $go and a scratch directory in $work
# to build into $work/bin, which `gobuild_install` checks and moves into place.

cache=${PG_AIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pg_aio_exporter}
dest=$cache/$slug
log=$cache/$slug.log
# Debian 12's Go (1.19) is older than the modules allow and cannot fetch a newer one itself.
newer_go=1.24.6

fail() {
    local where=""
    [ -s "$log" ] && where=" (log: $log)"
    echo "cannot build $name for the tests: $*$where" >&2
    exit 1
}

built() {
    local tool
    for tool in "${tools[@]}"; do [ -x "$dest/$tool" ] || return 1; done
}

# Downloads a module@version through the proxy and prints its directory in the module cache.
download() {
    "$go" mod download -json "$1" >"$work/download.json" 2>>"$log" || {
        cat "$work/download.json" >>"$log" # its JSON answer says why
        fail "go mod download $1 failed"
    }
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' "$work/download.json"
}

gobuild_prepare() {
    built && { echo "$dest"; exit 0; }
    # Go where scripts/system-deps.sh or the upstream tarball puts it when it is not on PATH.
    go=$(command -v go || ls /usr/local/go/bin/go /usr/lib/go/bin/go 2>/dev/null | head -1 || true)
    [ -n "$go" ] || fail "no Go toolchain (scripts/system-deps.sh installs golang-go)"
    mkdir -p "$cache"
    # Checkouts building at the same moment wait for the first one instead of building twice.
    exec 9>"$cache/$slug.lock"
    flock 9
    built && { echo "$dest"; exit 0; }

    work=$(mktemp -d "$cache/${slug%-*}-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    : >"$log"
    # Go 1.21 and later fetch the toolchain a module asks for themselves; an older Go fetches
    # Go $newer_go, itself a module of the proxy, into the cache (shared by both builds).
    export GOTOOLCHAIN=auto GOFLAGS=-buildvcs=false
    if ! "$go" version | grep -qE ' go1\.(2[1-9]|[3-9][0-9])'; then
        if [ ! -x "$cache/go-$newer_go/bin/go" ]; then
            local toolchain
            toolchain=$(download "golang.org/toolchain@v0.0.1-go$newer_go.linux-$("$go" env GOARCH)")
            cp -r "$toolchain" "$work/go"
            chmod -R u+w "$work/go"
            # Module archives keep no execute bits.
            chmod u+x "$work/go/bin/"* "$work/go/pkg/tool/"*/*
            rm -rf "$cache/go-$newer_go"
            mv "$work/go" "$cache/go-$newer_go"
        fi
        go=$cache/go-$newer_go/bin/go
    fi
}

# $work/bin becomes the cached directory once `$1 --version` says `$2`; prints its path.
gobuild_install() {
    "$work/bin/$1" --version 2>&1 | grep -qF -- "$2" ||
        fail "the built $1 does not report version $version"
    rm -rf "$dest"
    mv "$work/bin" "$dest"
    echo "$dest"
}
