//! `liburma-loopback-preload.so`: the stand-in for the kernel driver (ubcore/uburma) of a
//! hardware provider, for the devices of the loopback plugin of the genuine URMA core.
//!
//! The genuine core asks a device's character device `/dev/uburma/<dev>` for two things, even
//! for a device its provider made itself: the device attributes (`urma_query_device`) and the
//! EID list (`urma_get_eid_list`). Without the kernel modules nothing answers, and
//! `urma_query_device` fails (`docs/umdk-core.md`). Loaded with `LD_PRELOAD`, this library
//! interposes the four C-library functions the core reaches the device with, through its PLT:
//!
//! * `realpath` of `/dev/uburma/<dev>`, for a device of the plugin: the path itself (the core
//!   resolves before it opens);
//! * `open` / `open64` of that path: a descriptor on `/dev/null` ([`vfd`] remembers its device);
//! * `ioctl` on such a descriptor: the two commands answered from the plugin
//!   ([`answer`]; the plugin's `urma_loopback_plugin_query_device` and
//!   `urma_loopback_plugin_eid_list`, found with `urma_loopback_ctl::plugin::symbol`), every
//!   other request failing with `ENOTTY` like an ioctl the device does not know;
//! * `close` of such a descriptor: forgotten.
//!
//! Everything else goes straight to the C library's function (`dlsym(RTLD_NEXT)`). A device is
//! the plugin's when its query function knows the name; without the plugin in the process,
//! nothing is virtual. Each export runs behind a panic boundary.
//!
//! `open` and `ioctl` are variadic in C. They are defined here with their optional argument as
//! a fixed one (`mode`, the ioctl argument): on the ABIs this library is built for (x86_64 and
//! aarch64 Linux) a variadic integer or pointer argument is passed where the fixed one would be,
//! and `mode` is only used when the C library would read it.

pub mod answer;
// The exports interpose the C library: not in the unit-test binary.
#[cfg(not(test))]
mod interpose;
pub mod vfd;

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!(
    "urma-loopback-preload defines the variadic open and ioctl with fixed arguments: check the \
     calling convention of variadic arguments on this target first"
);
