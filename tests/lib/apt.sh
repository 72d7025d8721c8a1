# Shared by tests/setup and kmod/test/fetch-kernels: apt with retries, and a
# private apt state (its own sources, lists and cache) that reaches
# bookworm-backports without touching the machine's apt configuration.

retry() {
    local i
    for i in 1 2 3 4 5; do
        "$@" && return 0
        echo "failed (attempt $i): $*" >&2
        sleep $((i * 5))
    done
    return 1
}

# private_apt_init DIR: sets the array PRIVATE_APT to apt options using DIR.
private_apt_init() {
    local dir=$1
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/empty"
    cat > "$dir/sources.list" <<SOURCES
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
deb http://deb.debian.org/debian bookworm-backports main
SOURCES
    PRIVATE_APT=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/empty"
        -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
        -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$dir/empty"
        -o "APT::Sandbox::User=root")
    # Refresh the package lists at most once a day.
    if [ -z "$(find "$dir/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
        retry apt-get "${PRIVATE_APT[@]}" -qq update >&2
    fi
}

# The cache folder of the kernel tests.
kernel_cache() {
    echo "${PERFABI_KERNEL_CACHE:-$HOME/.cache/perfabi-kernels}"
}
