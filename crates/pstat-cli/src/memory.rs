//! How the process takes memory from the kernel. A study allocates and frees buffers of
//! megabytes to gigabytes all the time (a batch's activations in every sublayer, every probe
//! fit's standardized bags), and with glibc's defaults each of them is a fresh mapping whose
//! 4 KiB pages fault in one by one and are unmapped again on free: a quarter of the probe
//! fits' CPU time went to the kernel's page faults. Nothing here changes a number the study
//! computes.

use std::alloc::{GlobalAlloc, Layout, System};

/// Keeps freed heap memory in the process instead of handing it back to the kernel:
/// allocations up to 32 MiB (glibc's ceiling) come from the heap rather than a mapping of
/// their own, and up to 512 MiB of freed heap is kept. The buffers live at the peak are the
/// same, so the peak memory is not raised. Call it before any other thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn keep_freed_memory() {
    // SAFETY: mallopt only sets allocator parameters, and no other thread is running.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

/// Other allocators keep their defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_freed_memory() {}

/// The system allocator, with the blocks it must map apart (at least [`LARGE`] bytes) backed
/// by transparent huge pages where the kernel offers them on request (`madvise`, the usual
/// setting): one fault per 2 MiB instead of 512.
pub struct LargePages;

/// glibc maps every block of 32 MiB or more on its own (its mmap threshold cannot be set
/// higher); smaller ones come from the heap, which [`keep_freed_memory`] keeps.
const LARGE: usize = 32 << 20;

/// The size of a transparent huge page on x86-64 and aarch64 with 4 KiB pages.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

// SAFETY: every call is forwarded to `System` unchanged; `advise` only gives the kernel a hint
// about pages of the block just returned, and never touches its contents.
unsafe impl GlobalAlloc for LargePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is the same as System's.
        let block = unsafe { System.alloc(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above. A freshly mapped block is zero without being written, so its
        // pages are still untouched when the advice is given.
        let block = unsafe { System.alloc_zeroed(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        advise(moved, new_size);
        moved
    }
}

/// Asks for huge pages over the whole 2 MiB pages inside a large block (a hint: the kernel
/// may ignore it, and an error changes nothing).
#[cfg(target_os = "linux")]
fn advise(block: *mut u8, size: usize) {
    if block.is_null() || size < LARGE {
        return;
    }
    let start = (block as usize).next_multiple_of(HUGE_PAGE);
    let end = (block as usize + size) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: [start, end) lies inside the block the allocator just returned; MADV_HUGEPAGE
        // changes how its pages are backed, never what they hold.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_block: *mut u8, _size: usize) {}
