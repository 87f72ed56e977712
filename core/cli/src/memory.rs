//! How the process's allocator treats large buffers. glibc's malloc serves a block over its
//! mapping threshold from a mapping of its own, unmapped when freed; but the threshold starts
//! at 128 KiB and rises to the size of each large block freed (up to 32 MiB), after which
//! blocks of megabytes come from the heap, where a freed one stays resident and holes keep
//! the heap from shrinking. A host handling a few large messages (a long tool answer, a
//! long model reply) then keeps their peak for good, and the copies of a message along its
//! way add up instead of following one another. A fixed threshold of 1 MiB keeps every large
//! buffer mapped: measured in BENCHMARKS.md (`large_messages`), a 10 MB model reply added
//! 66 MB to the peak with the moving threshold and 48 MB with this one.

/// The size from which a block is mapped on its own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAPPED_FROM: libc::c_int = 1 << 20;

/// Sets the threshold (see the module); first thing in `main`, before any large block.
pub(crate) fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes a setting of glibc's allocator; called before other threads
    // exist. An environment variable of glibc's own (MALLOC_MMAP_THRESHOLD_) set by the
    // user is left to win.
    unsafe {
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MAPPED_FROM);
        }
    }
}
