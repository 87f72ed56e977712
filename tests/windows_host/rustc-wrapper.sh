#!/bin/sh
# RUSTC_WRAPPER for the Windows build (tests/src/windows.rs): Debian's rustc 1.85 compiles the
# workspace's crates and their dependencies, some of which use what became stable after 1.85.
# Each such feature is enabled by name (RUSTC_BOOTSTRAP=1 allows it); std's own sources, built
# by -Zbuild-std, are passed through untouched. docs/src/guide/building.md says which crate
# needs which Rust.
#   let_chains 1.88, slice_as_chunks 1.88, integer_sign_cast 1.87,
#   unsigned_is_multiple_of 1.87, const_black_box 1.86, target_feature_11 1.86,
#   file_lock 1.89 (the host's audit log: `File::lock`).
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
features="let_chains,integer_sign_cast,unsigned_is_multiple_of,const_black_box,target_feature_11,slice_as_chunks"
case "$crate" in
    toolhost) features="$features,file_lock" ;;
esac
set -- "$@" "-Zcrate-attr=feature($features)" -Awarnings
case "$crate" in
    # sha2 0.11's default backend selects x86 intrinsics through cfgs 1.85 does not know.
    sha2) set -- "$@" --cfg 'sha2_backend="soft"' ;;
esac
exec "$rustc" "$@"
