#!/bin/sh
# RUSTC_WRAPPER for the Windows build (tests/src/windows.rs): Debian's rustc 1.85 compiles the
# workspace's crates and their dependencies. The five crates below use what became stable
# after 1.85; each gets those features enabled by name (RUSTC_BOOTSTRAP=1 allows it), and
# every other crate (plugin-api, plugin-abi, the plugins and all their dependencies) is built
# as plain 1.85 builds it. A crate that starts to need a newer Rust fails this build with
# rustc's error naming the feature: add it here and to docs/src/guide/building.md ("What
# needs a newer Rust than 1.85"). std's own sources, built by -Zbuild-std, pass through.
rustc="$1"
shift
crate=""
std_source=""
previous=""
for arg in "$@"; do
    if [ "$previous" = "--crate-name" ]; then
        crate="$arg"
    fi
    case "$arg" in
        /usr/src/rustc-*/* | /usr/lib/rustlib/src/*) std_source=1 ;;
    esac
    previous="$arg"
done
if [ -n "$std_source" ] || [ -z "$crate" ]; then
    exec "$rustc" "$@"
fi
case "$crate" in
    # let chains 1.88, `is_multiple_of` 1.87
    zip) features="let_chains,unsigned_is_multiple_of" ;;
    # `cast_signed`/`cast_unsigned` 1.87 (in const fns too), `black_box` in const fns 1.86
    ctutils) features="integer_sign_cast,const_black_box" ;;
    # `as_chunks` 1.88
    sha2) features="slice_as_chunks" ;;
    # `is_multiple_of` 1.87
    toolhost_reply) features="unsigned_is_multiple_of" ;;
    # `File::lock` 1.89 (the audit log), `is_multiple_of` 1.87
    toolhost) features="file_lock,unsigned_is_multiple_of" ;;
    *) features="" ;;
esac
if [ -n "$features" ]; then
    set -- "$@" "-Zcrate-attr=feature($features)"
fi
case "$crate" in
    # sha2 0.11's default backend selects x86 intrinsics through cfgs 1.85 does not know.
    sha2) set -- "$@" --cfg 'sha2_backend="soft"' ;;
esac
exec "$rustc" "$@" -Awarnings
